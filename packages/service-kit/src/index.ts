export { AccessLog } from './access-log.ts'
export { runService, SHUTDOWN_DEADLINE_MS, type ServiceDefinition } from './run-service.ts'
