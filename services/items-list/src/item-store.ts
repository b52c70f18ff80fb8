import { createClient } from 'redis'
import type { FastifyBaseLogger } from 'fastify'
import { describeError } from '@repo/http-errors'

/** The ordered list of item names. The only module that talks to Redis. */
export interface ItemStore {
  /** Appends `name` at the end of the list. */
  append(name: string): Promise<void>
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

export interface RedisItemStoreOptions {
  host: string
  port: number
  password?: string | undefined
  database: number
  key: string
  /** Longest a command may take before the caller gets `StoreUnavailableError`. */
  deadlineMs?: number
  logger: FastifyBaseLogger
}

/** Well under a second, so that a request answers 503 within 1 s however Redis fails. */
const DEFAULT_DEADLINE_MS = 500
/** Reconnect quickly after a restart, without hammering a Redis that stays down. */
const MAX_RECONNECT_DELAY_MS = 500

/**
 * An `ItemStore` on a Redis list. It starts without waiting for Redis, reconnects by itself
 * forever, and fails fast while Redis is away: commands are never queued offline, and every
 * command has its own deadline, because node-redis's timeout does not cover a command that
 * was already written to a socket that stopped answering.
 */
export function createRedisItemStore(options: RedisItemStoreOptions): ItemStore {
  const { key, logger, deadlineMs = DEFAULT_DEADLINE_MS } = options
  const client = createClient({
    socket: {
      host: options.host,
      port: options.port,
      connectTimeout: 1_000,
      reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS),
    },
    ...(options.password === undefined ? {} : { password: options.password }),
    database: options.database,
    disableOfflineQueue: true,
    // Our deadline replaces node-redis's per-command timeout, which costs an AbortSignal per
    // command and still misses commands already written to a socket that went silent.
    commandOptions: { timeout: 0 },
  })

  // Without an 'error' listener a socket error would crash the process. Report an outage
  // once, not on every reconnection attempt.
  let outageReported = false
  client.on('error', (error: unknown) => {
    if (outageReported) return
    outageReported = true
    logger.warn({ error: describeError(error) }, 'Redis unavailable; reconnecting in the background')
  })
  client.on('ready', () => {
    outageReported = false
    logger.info({ host: options.host, port: options.port }, 'Redis connection ready')
  })

  logger.info({ host: options.host, port: options.port, database: options.database }, 'connecting to Redis')
  // connect() only settles once Redis answers, or rejects when close() interrupts it; the
  // 'error' listener reports outages, so neither outcome needs handling here.
  client.connect().catch(() => {})

  function withDeadline<T>(command: Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new StoreUnavailableError(`Redis did not answer within ${deadlineMs} ms`)), deadlineMs)
      command.then(
        (value) => {
          clearTimeout(timer)
          resolve(value)
        },
        (error: unknown) => {
          clearTimeout(timer)
          reject(new StoreUnavailableError('Redis command failed', { cause: error }))
        },
      )
    })
  }

  return {
    async append(name) {
      await withDeadline(client.rPush(key, name))
    },
    list() {
      return withDeadline(client.lRange(key, 0, -1))
    },
    removeAll(name) {
      // LREM with count 0 removes every occurrence and reports how many: one atomic step,
      // so concurrent deletes of one name cannot both see it.
      return withDeadline(client.lRem(key, 0, name))
    },
    async ping() {
      await withDeadline(client.ping())
    },
    async close() {
      if (!client.isOpen) return
      try {
        await withDeadline(client.close())
      } catch {
        client.destroy()
      }
      logger.info('Redis connection closed')
    },
  }
}
