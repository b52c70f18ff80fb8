export { AccessLog } from './access-log.ts'
export { withDeadline } from './deadline.ts'
export { createLogger, LOG_REDACT_PATHS } from './logger.ts'
export { serviceKit, type ServiceKitOptions } from './plugins/index.ts'
export { securityHeadersOnce as securityHeaders } from './plugins/security-headers.ts'
export type { RateLimitRedis } from './plugins/rate-limit.ts'
export {
  createRedisConnection,
  RedisUnavailableError,
  type CommandOutcome,
  type RedisClient,
  type RedisConnection,
  type RedisConnectionOptions,
  clientOptions,
  type RedisAuth,
  type RedisCommands,
  type RedisSentinelClient,
  type RedisSentinelTarget,
  type RedisSubscriber,
  type RedisTarget,
} from './redis-connection.ts'
export { runService, type ServiceDefinition } from './run-service.ts'
export { createServer, type ServerOptions } from './server.ts'
