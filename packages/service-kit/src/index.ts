// service-kit's entry point: what both services are built from (the server, the plugins every
// service registers, the logger, the Redis connection, the process that runs them).
export { AccessLog } from './logging/access-log.ts'
export { createLogger } from './logging/logger.ts'
export { serviceKit, type ServiceKitOptions } from './http/service-kit.ts'
export type { RateLimitRedis } from './http/rate-limit.ts'
export {
  createRedisConnection,
  RedisUnavailableError,
  type CommandOutcome,
  type RedisClient,
  type RedisConnection,
  type RedisConnectionOptions,
  type RedisCommands,
  type RedisSentinelClient,
  type RedisSubscriber,
} from './redis/connection.ts'
export type { RedisAuth, RedisSentinelTarget, RedisTarget } from './redis/location.ts'
export { runService, type ServiceDefinition } from './process/run-service.ts'
export { createServer, type ServerOptions } from './http/server.ts'
