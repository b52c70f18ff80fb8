import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { trace } from '@opentelemetry/api'
import type { FastifyBaseLogger } from 'fastify'
import type { RedisConnection, RedisSubscriber } from '@repo/service-kit'

/**
 * The production lock (docs/design.md, "Sharing across replicas"): one replica produces an
 * answer while the others wait for its announcement.
 */

/**
 * A claim on producing one answer across replicas (docs/design.md, "Sharing across replicas"):
 * `mine` when this replica took the lock (release it when done), `theirs` when another replica
 * holds it (`released` settles when it announces the end, when Redis can no longer tell, or after
 * the wait), `unknown` when Redis cannot say (then produce alone).
 */
export type ProductionClaim = { kind: 'mine'; release(): void } | { kind: 'theirs'; released: Promise<void> } | { kind: 'unknown' }

/** Concurrent cold requests on different replicas share one production. */
export interface ProductionLock {
  /** Claims the production of `key`. */
  claim(key: string): Promise<ProductionClaim>
  /**
   * Releases and announces the locks of productions still under way here, so that replicas
   * waiting on them go on at once rather than after the lock's expiry, and lets every waiter of
   * this process go. Resolves once Redis has the releases (or has failed them): before the
   * connection closes.
   */
  close(): Promise<void>
}

export interface ProductionLockOptions {
  connection: RedisConnection
  /** The deployment's key prefix (`namespaceFor`): locks and announcements stay within it. */
  namespace: string
  /**
   * How long a replica waits on another's production (`FORGE_TIMEOUT_MS`). The lock expires
   * after twice that, so a replica that died holding it stops nobody for long.
   */
  waitMs: number
  /** How often a waiter asks Redis whether it still answers: a hung Redis sends no error. */
  probeIntervalMs: number
  logger: FastifyBaseLogger
}

/** Without a tracing SDK in the process, OpenTelemetry's API hands out spans that record nothing. */
const tracer = trace.getTracer('forge-aggregator')

// Deletes the lock only if it is still ours (it may have expired and been taken by another
// replica), and announces the end of the production in the same step.
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
return redis.call('publish', KEYS[2], ARGV[2])`

/**
 * A `ProductionLock` in Redis: `SET NX PX` with a random token, released by a script that deletes
 * only its own token, and announced on one pub/sub channel per deployment, so that waiters on
 * other replicas wake at once instead of polling.
 */
export function createProductionLock(options: ProductionLockOptions): ProductionLock {
  const { connection, namespace, waitMs, logger } = options
  const channel = `${namespace}released`
  const announcements = listenForReleases(connection, channel, logger)
  const owned = ownedLocks(connection, namespace, channel)
  const isAvailable = () => connection.isAvailable && announcements.isListening()

  return {
    async claim(key) {
      // Without the channel, waiting on another replica would be waiting blind: produce alone.
      if (!isAvailable()) return { kind: 'unknown' }
      // Listen before asking for the lock, so that an end announced in between is not missed.
      const waiter = waitForRelease(announcements.releases, key, options)
      const token = randomUUID()
      let taken: string | null
      try {
        taken = await connection.run('SET', (client) =>
          client.set(`${namespace}lock:${key}`, token, { condition: 'NX', expiration: { type: 'PX', value: 2 * waitMs } }),
        )
      } catch {
        waiter.cancel()
        return { kind: 'unknown' }
      }
      if (taken === null) {
        // In the request's trace, the time spent waiting on the other replica's production.
        const span = tracer.startSpan('shared-cache lock wait')
        return { kind: 'theirs', released: waiter.released.finally(() => span.end()) }
      }
      waiter.cancel()
      owned.add(key, token)
      return { kind: 'mine', release: () => owned.release(key, token) }
    },
    async close() {
      const stillOwned = owned.releaseAll()
      if (stillOwned > 0) logger.info({ locks: stillOwned }, 'production locks released at shutdown')
      announcements.wakeEveryone()
      await owned.settled()
    },
  }
}

/** The announcements of ended productions, heard on `channel`: one event per key on `releases`. */
interface Announcements {
  /** One event per key whose production ended; one listener per waiting key of this process. */
  releases: EventEmitter
  /** Whether the subscription is up: without it, a waiter would never hear the end. */
  isListening(): boolean
  /** Lets every waiter go and look for itself: Redis may not tell it anything anymore. */
  wakeEveryone(): void
}

function listenForReleases(connection: RedisConnection, channel: string, logger: FastifyBaseLogger): Announcements {
  const releases = new EventEmitter().setMaxListeners(0)
  const subscriber: RedisSubscriber = connection.duplicate()
  let subscribed = false
  const wakeEveryone = () => {
    for (const key of releases.eventNames().filter((name) => name !== 'error')) releases.emit(key)
  }
  subscriber.on('error', wakeEveryone)
  subscriber
    .connect()
    .then(() => subscriber.subscribe(channel, (key) => releases.emit(key)))
    .then(() => {
      subscribed = true
      logger.info({ channel }, 'listening for production announcements')
    })
    .catch(() => {})
  return { releases, isListening: () => subscribed && subscriber.isReady, wakeEveryone }
}

/** The locks this process owns, by key, each released once: by its production or by `close()`. */
function ownedLocks(connection: RedisConnection, namespace: string, channel: string) {
  const tokens = new Map<string, string>()
  const releasing = new Set<Promise<void>>()

  function release(key: string, token: string): void {
    if (tokens.get(key) !== token) return
    tokens.delete(key)
    const released = connection
      .run('EVAL', (client) => client.eval(RELEASE, { keys: [`${namespace}lock:${key}`, channel], arguments: [token, key] }))
      .then(
        () => {},
        () => {},
      )
    releasing.add(released)
    void released.then(() => releasing.delete(released))
  }

  return {
    add: (key: string, token: string) => void tokens.set(key, token),
    release,
    /** Releases every lock still owned; how many there were. */
    releaseAll(): number {
      const count = tokens.size
      for (const [key, token] of tokens) release(key, token)
      return count
    },
    /** Resolves once Redis has every release sent (or has failed it). */
    settled: () => Promise.all(releasing).then(() => {}),
  }
}

/** Resolves when `key`'s production is announced over, Redis stops answering, or after `waitMs`. */
function waitForRelease(releases: EventEmitter, key: string, { connection, waitMs, probeIntervalMs }: ProductionLockOptions): { released: Promise<void>; cancel(): void } {
  const cancelled = new AbortController()
  const signal = AbortSignal.any([cancelled.signal, AbortSignal.timeout(waitMs)])
  const watchdog = setInterval(() => {
    connection.run('PING', (client) => client.ping()).catch(() => releases.emit(key))
  }, probeIntervalMs).unref()
  const released = once(releases, key, { signal })
    .then(
      () => {},
      () => {},
    )
    .finally(() => clearInterval(watchdog))
  return { released, cancel: () => cancelled.abort() }
}
