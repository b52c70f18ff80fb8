// `RATE_LIMIT_PER_MINUTE` per client address, counted in Redis when the service has one so that
// replicas share one count; a request is let through when Redis is slow or down.
import rateLimitPlugin, { type FastifyRateLimitStore, type FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import fp from 'fastify-plugin'
import { HttpError } from '@repo/http-errors'
import { withDeadline } from '../redis/deadline.ts'

/** What the rate limit needs of a node-redis client (`redis` package), so replicas share one count. */
export interface RateLimitRedis {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
}

export interface RateLimitOptions {
  /** `RATE_LIMIT_PER_MINUTE`: requests one client address may make per minute; 0, no limit. */
  perMinute: number
  errorBody: (message: string) => Record<string, unknown>
  /** Where the counts live, shared by replicas; in the process when omitted. */
  redis?: RateLimitRedis | undefined
  /** Names the service in its Redis keys: services sharing one Redis count apart. */
  service: string
}

/** Probes and scrapes are never limited: an orchestrator must always see the service. */
const NOT_LIMITED: ReadonlySet<string | undefined> = new Set(['/health', '/ready', '/metrics'])

/**
 * A count that a limited store misses must not hold a request up for: past it, the request is let
 * through (the store's failure is not the client's), as when Redis is down.
 */
const STORE_DEADLINE_MS = 250
const storeMissedDeadline = () => new Error(`the rate-limit store did not answer within ${STORE_DEADLINE_MS} ms`)

/**
 * One step: count the request, and start the client's window with its first request only (a
 * fixed window: later requests never push its end back). Returns the count and the
 * milliseconds left in the window.
 */
const COUNT_SCRIPT = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return { current, redis.call('PTTL', KEYS[1]) }
`

/**
 * `RATE_LIMIT_PER_MINUTE` per client address (`request.ip`, so `TRUST_PROXY` decides who the
 * client is); over it, 429 in the service's error shape with `Retry-After`.
 */
export const rateLimit = fp<RateLimitOptions>(
  async (app, options) => {
    if (!options.perMinute) return
    await app.register(rateLimitPlugin, {
      max: options.perMinute,
      timeWindow: 60_000,
      allowList: (request) => NOT_LIMITED.has(request.routeOptions.url),
      // A store that fails lets requests through rather than failing them all.
      skipOnError: true,
      ...(options.redis ? { store: redisStore(options.redis, `rate-limit:${options.service}:`) } : {}),
      errorResponseBuilder: (_request, context) =>
        new HttpError(context.statusCode, options.errorBody(`Rate limit exceeded, retry in ${context.after}`)),
    })
  },
  { name: 'rate-limit', fastify: '5.x' },
)

/** @fastify/rate-limit's Redis store is written for ioredis; this one speaks node-redis. */
function redisStore(redis: RateLimitRedis, keyPrefix: string): FastifyRateLimitStoreCtor {
  class RedisRateLimitStore implements FastifyRateLimitStore {
    private readonly prefix: string

    constructor(_options: unknown, prefix = keyPrefix) {
      this.prefix = prefix
    }

    incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void, timeWindow: number): void {
      const count = redis.eval(COUNT_SCRIPT, { keys: [this.prefix + key], arguments: [String(timeWindow)] })
      withDeadline(count, STORE_DEADLINE_MS, storeMissedDeadline).then(
        (reply) => {
          const [current, ttl] = reply as [number, number]
          callback(null, { current, ttl })
        },
        (error: unknown) => callback(error as Error),
      )
    }

    /** A route with a limit of its own counts apart from the global one. */
    child(route: { method: string | string[]; url: string }): FastifyRateLimitStore {
      return new RedisRateLimitStore(undefined, `${this.prefix}${String(route.method)}${route.url}:`)
    }
  }
  return RedisRateLimitStore
}
