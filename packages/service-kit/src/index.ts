export { AccessLog } from './logging/access-log.ts'
export { withDeadline } from './redis/deadline.ts'
export { createLogger, LOG_REDACT_PATHS } from './logging/logger.ts'
export { serviceKit, type ServiceKitOptions } from './http/service-kit.ts'
export { securityHeadersOnce as securityHeaders } from './http/security-headers.ts'
export type { RateLimitRedis } from './http/rate-limit.ts'
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
} from './redis/connection.ts'
export { runService, type ServiceDefinition } from './process/run-service.ts'
export { createServer, type ServerOptions } from './http/server.ts'
