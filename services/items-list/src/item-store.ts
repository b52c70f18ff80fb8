import { createHash } from 'node:crypto'
import { createClient, defineScript, type CommandParser } from 'redis'
import type { FastifyBaseLogger } from 'fastify'
import { Registry } from 'prom-client'
import { describeError } from '@repo/http-errors'
import { withDeadline, type RateLimitRedis } from '@repo/service-kit'
import { createStoreMetrics, type StoreCommand } from './store-metrics.ts'

/** What became of an append made under an idempotency key. */
export type OnceOutcome = 'appended' | 'replayed' | 'conflict'

/** The ordered list of item names. The only module that talks to Redis. */
export interface ItemStore {
  /** Appends `name` at the end of the list. */
  append(name: string): Promise<void>
  /**
   * Appends `name` unless `key` was already used: `replayed` when it was, for the same name
   * (nothing appended), `conflict` when for another name. The append and the record of the key
   * are one atomic step, so an append is never stored without its key or the other way round.
   */
  appendOnce(name: string, key: string): Promise<OnceOutcome>
  /** Every name, in insertion order. */
  list(): Promise<string[]>
  /** Removes every occurrence of `name` in one atomic step; resolves to how many were removed. */
  removeAll(name: string): Promise<number>
  /** Resolves when the store answers; rejects with `StoreUnavailableError` otherwise. */
  ping(): Promise<void>
  /** Lets in-flight commands finish (within the deadline), then closes the connection. */
  close(): Promise<void>
}

/** Thrown by every `ItemStore` method when Redis cannot be reached or does not answer in time. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}

/** The deadline passed before Redis answered: counted as a timeout rather than an error. */
class DeadlinePassedError extends StoreUnavailableError {
  constructor(deadlineMs: number) {
    super(`Redis did not answer within ${deadlineMs} ms`)
  }
}

export interface RedisItemStoreOptions {
  /** `redis://` or `rediss://`; when given, it replaces host, port, password and database. */
  url?: string | undefined
  host: string
  port: number
  password?: string | undefined
  database: number
  key: string
  /** How long an idempotency key is remembered. */
  idempotencyTtlSeconds?: number
  /** Where the store's metrics go (the app's registry, served at /metrics). */
  metrics?: Registry
  /** Longest a command may take before the caller gets `StoreUnavailableError`. */
  deadlineMs?: number
  logger: FastifyBaseLogger
}

/** Well under a second, so that a request answers 503 within 1 s however Redis fails. */
const DEFAULT_DEADLINE_MS = 500
/** Reconnect quickly after a restart, without hammering a Redis that stays down. */
const MAX_RECONNECT_DELAY_MS = 500
/** A day: longer than any client goes on retrying one request. */
const DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86_400

/**
 * KEYS: the list, the key's record. ARGV: the name, its fingerprint, the record's lifetime (s).
 * Run as one script, the append and the record are stored together or not at all, and AOF
 * keeps them together across a crash: a client that retries after a lost answer finds the
 * record and gets the first answer again instead of a second append.
 */
const APPEND_ONCE = defineScript({
  SCRIPT: `
local recorded = redis.call('GET', KEYS[2])
if recorded then
  if recorded == ARGV[2] then return 'replayed' end
  return 'conflict'
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 'appended'
`,
  NUMBER_OF_KEYS: 2,
  parseCommand(parser: CommandParser, list: string, record: string, name: string, fingerprint: string, ttlSeconds: number) {
    parser.pushKey(list)
    parser.pushKey(record)
    parser.push(name, fingerprint, String(ttlSeconds))
  },
  transformReply: (reply: unknown) => String(reply) as OnceOutcome,
})

/**
 * What identifies a request under one key: its name, the only field an append reads (other
 * fields are ignored, so a body that differs only by them is the same request). Hashed so that a
 * record stays small whatever the name.
 */
function fingerprintOf(name: string): string {
  return createHash('sha256').update(name).digest('base64url')
}

/**
 * An `ItemStore` on a Redis list. It starts without waiting for Redis, reconnects by itself
 * forever, and fails fast while Redis is away: commands are never queued offline, and every
 * command has its own deadline, because node-redis's timeout does not cover a command that
 * was already written to a socket that stopped answering.
 */
export function createRedisItemStore(options: RedisItemStoreOptions): ItemStore & { readonly redis: RateLimitRedis } {
  const { key, logger, deadlineMs = DEFAULT_DEADLINE_MS, idempotencyTtlSeconds = DEFAULT_IDEMPOTENCY_TTL_SECONDS } = options
  const socket = {
    connectTimeout: 1_000,
    reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS),
  }
  const client = createClient({
    ...(options.url === undefined
      ? {
          socket: { ...socket, host: options.host, port: options.port },
          ...(options.password === undefined ? {} : { password: options.password }),
          database: options.database,
        }
      : { url: options.url, socket }),
    disableOfflineQueue: true,
    // Our deadline replaces node-redis's per-command timeout, which costs an AbortSignal per
    // command and still misses commands already written to a socket that went silent.
    commandOptions: { timeout: 0 },
    scripts: { appendOnce: APPEND_ONCE },
  })
  const metrics = createStoreMetrics(options.metrics ?? new Registry())
  // Where we connect, for the logs: never the URL itself, which may hold a password.
  const target = options.url === undefined ? { host: options.host, port: options.port, database: options.database } : redactedTarget(options.url)

  // Without an 'error' listener a socket error would crash the process. Report an outage
  // once, not on every reconnection attempt.
  let outageReported = false
  client.on('error', (error: unknown) => {
    metrics.up(false)
    if (outageReported) return
    outageReported = true
    logger.warn({ error: describeError(error) }, 'Redis unavailable; reconnecting in the background')
  })
  client.on('ready', () => {
    metrics.up(true)
    outageReported = false
    logger.info(target, 'Redis connection ready')
  })

  logger.info(target, 'connecting to Redis')
  // connect() only settles once Redis answers, or rejects when close() interrupts it; the
  // 'error' listener reports outages, so neither outcome needs handling here.
  client.connect().catch(() => {})

  client.on('end', () => metrics.up(false))

  const missedDeadline = () => new DeadlinePassedError(deadlineMs)

  /** A command under the deadline, counted and timed by its outcome. */
  async function run<T>(command: StoreCommand, reply: Promise<T>): Promise<T> {
    const started = performance.now()
    try {
      const value = await withDeadline(reply, deadlineMs, missedDeadline)
      metrics.command(command, 'ok', (performance.now() - started) / 1000)
      return value
    } catch (error) {
      const timedOut = error instanceof DeadlinePassedError
      metrics.command(command, timedOut ? 'timeout' : 'error', (performance.now() - started) / 1000)
      throw timedOut ? error : new StoreUnavailableError('Redis command failed', { cause: error })
    }
  }

  return {
    // The rate limit counts on the same connection, so that replicas share their counts.
    redis: client,
    async append(name) {
      await run('rpush', client.rPush(key, name))
    },
    appendOnce(name, idempotencyKey) {
      const record = `${key}:idempotency:${idempotencyKey}`
      return run('append_once', client.appendOnce(key, record, name, fingerprintOf(name), idempotencyTtlSeconds))
    },
    list() {
      return run('lrange', client.lRange(key, 0, -1))
    },
    removeAll(name) {
      // LREM with count 0 removes every occurrence and reports how many: one atomic step,
      // so concurrent deletes of one name cannot both see it.
      return run('lrem', client.lRem(key, 0, name))
    },
    async ping() {
      await run('ping', client.ping())
    },
    async close() {
      if (!client.isOpen) return
      try {
        await withDeadline(client.close(), deadlineMs, missedDeadline)
      } catch {
        client.destroy()
      }
      logger.info('Redis connection closed')
    },
  }
}

function redactedTarget(url: string): Record<string, unknown> {
  const { protocol, host, pathname } = new URL(url)
  return { url: `${protocol}//${host}${pathname}` }
}
