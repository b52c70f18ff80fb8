import rateLimit, { type FastifyRateLimitStore, type FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import { HttpError } from '@repo/http-errors'
import { withDeadline } from './deadline.ts'

/** What the rate limit needs of a node-redis client (`redis` package), so replicas share one count. */
export interface RateLimitRedis {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
}

export interface RateLimitOptions {
  /** Requests one client address may make per minute. */
  perMinute: number
  errorBody: (message: string) => Record<string, unknown>
  /** Where the counts live; in the process when omitted. */
  redis?: RateLimitRedis | undefined
  /** Names the service in its Redis keys: services sharing one Redis count apart. */
  service: string
}

/** Probes and scrapes are never limited: an orchestrator must always see the service. */
const NOT_LIMITED: ReadonlySet<string | undefined> = new Set(['/health', '/ready', '/metrics'])

/**
 * A count that a limited store miss must not hold a request up for: past it, the request is let
 * through (the store's failure is not the client's), as when Redis is down.
 */
const STORE_DEADLINE_MS = 250

/**
 * One step: count the request and start the client's window with its first request. Returns the
 * count and the milliseconds left in the window.
 */
const storeMissedDeadline = () => new Error(`the rate-limit store did not answer within ${STORE_DEADLINE_MS} ms`)

const COUNT_SCRIPT = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return { current, redis.call('PTTL', KEYS[1]) }
`

/**
 * `RATE_LIMIT_PER_MINUTE` per client address (`request.ip`, so `TRUST_PROXY` decides who the
 * client is); over it, 429 in the service's error shape with `Retry-After`.
 */
export async function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  await app.register(rateLimit, {
    max: options.perMinute,
    timeWindow: 60_000,
    allowList: (request) => NOT_LIMITED.has(request.routeOptions.url),
    // A store that fails lets requests through rather than failing them all.
    skipOnError: true,
    ...(options.redis ? { store: redisStore(options.redis, `rate-limit:${options.service}:`) } : {}),
    errorResponseBuilder: (_request, context) =>
      new HttpError(context.statusCode, options.errorBody(`Rate limit exceeded, retry in ${context.after}`)),
  })
}

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
