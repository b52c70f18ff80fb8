export { AccessLog } from './access-log.ts'
export { runService, type ServiceDefinition } from './run-service.ts'
