import { createHash, randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createClient } from 'redis'
import type { FastifyBaseLogger } from 'fastify'
import { describeError } from '@repo/http-errors'
import { withDeadline } from '@repo/service-kit'
import type { ForgeAggregatorConfig } from './config.ts'
import type { SharedStore } from './shared-store.ts'

export interface RedisStoreOptions {
  /** `REDIS_URL`. */
  url: string
  /** Prefix of every key and channel: `forge:<partition>:` (see `namespaceFor`). */
  namespace: string
  logger: FastifyBaseLogger
  /** Longest a read may take before it counts as unanswered and Redis is set aside. */
  deadlineMs?: number
  /** How often a Redis set aside is asked whether it answers again. */
  probeIntervalMs?: number
}

/** Short enough that a hung Redis costs a request a fraction of a second, once. */
const DEFAULT_DEADLINE_MS = 250
/** How often a Redis set aside for not answering is asked again whether it answers. */
const DEFAULT_PROBE_INTERVAL_MS = 1_000
const MAX_RECONNECT_DELAY_MS = 1_000

// Deletes the lock only if it is still ours (it may have expired and been taken by another
// replica), and announces the end of the production in the same step.
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
return redis.call('publish', KEYS[2], ARGV[2])`

/** For promises whose failure is reported elsewhere (the 'error' listener) or is the answer itself. */
const ignore = () => {}

/**
 * The key prefix of one deployment: a hash of what decides its answers (the API URL, the
 * token, the settings that shape an answer), so that deployments sharing one Redis never see
 * each other's answers. The token goes into the hash only; it is never written to Redis.
 */
export function namespaceFor(
  config: Pick<ForgeAggregatorConfig, 'FORGE_API_URL' | 'FORGE_TOKEN' | 'FORGE_FOLLOWERS_LIMIT' | 'FORGE_MAX_REPO_PAGES'>,
): string {
  const settings = [config.FORGE_API_URL, config.FORGE_TOKEN ?? null, config.FORGE_FOLLOWERS_LIMIT, config.FORGE_MAX_REPO_PAGES]
  return `forge:${createHash('sha256').update(JSON.stringify(settings)).digest('base64url').slice(0, 16)}:`
}

/**
 * A `SharedStore` on Redis (node-redis). It starts without waiting for Redis and reconnects by
 * itself. It never makes a request wait long for Redis: commands are not queued while it is
 * disconnected, every read has a deadline, and once a read misses it the store is set aside
 * (everything reads as empty) until a probe every second gets an answer again. An outage is
 * logged once, its end once. Waiting for another replica's production uses pub/sub on one
 * channel per deployment, so no one polls.
 */
export function createRedisStore(options: RedisStoreOptions): SharedStore {
  const { namespace, logger, deadlineMs = DEFAULT_DEADLINE_MS, probeIntervalMs = DEFAULT_PROBE_INTERVAL_MS } = options
  const client = createClient({
    url: options.url,
    socket: { connectTimeout: 1_000, reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS) },
    disableOfflineQueue: true,
    // Our deadline replaces node-redis's per-command timeout, which misses commands already
    // written to a socket that went silent.
    commandOptions: { timeout: 0 },
  })
  const subscriber = client.duplicate()
  const releasedChannel = `${namespace}released`
  // One event per key whose production ended; one listener per waiting request (one per key
  // per process: requests of one process already share a production).
  const releases = new EventEmitter().setMaxListeners(0)
  let setAside = false
  let probe: NodeJS.Timeout | undefined
  let outageReported = false

  function reportOutage(error: unknown): void {
    if (outageReported) return
    outageReported = true
    logger.warn({ error: describeError(error) }, 'Redis unavailable; answering from this process until it is back')
  }
  function reportRecovery(): void {
    if (!outageReported) return
    outageReported = false
    logger.info('Redis available again; answers are shared')
  }
  let subscribed = false
  // Without an 'error' listener a socket error would crash the process.
  client.on('error', reportOutage)
  client.on('ready', () => {
    if (!setAside) reportRecovery()
  })
  // A waiter must not outlive the connection that would tell it the production ended.
  subscriber.on('error', wakeEveryone)

  const isUsable = () => client.isReady && !setAside
  const isAvailable = () => isUsable() && subscribed && subscriber.isReady

  const missedDeadline = () => new Error(`Redis did not answer within ${deadlineMs} ms`)

  function setRedisAside(error: unknown): void {
    reportOutage(error)
    wakeEveryone()
    if (setAside) return
    setAside = true
    probe = setInterval(() => {
      withDeadline(client.ping(), deadlineMs, missedDeadline).then(
        () => {
          setAside = false
          clearInterval(probe)
          reportRecovery()
        },
        ignore,
      )
    }, probeIntervalMs).unref()
  }

  /** `command` within the deadline, or `fallback` (and Redis set aside) when it fails or misses it. */
  async function attempt<T, F>(command: () => Promise<T>, fallback: F): Promise<T | F> {
    if (!isUsable()) return fallback
    try {
      return await withDeadline(command(), deadlineMs, missedDeadline)
    } catch (error) {
      setRedisAside(error)
      return fallback
    }
  }

  /** A write nobody waits for; a failure is reported like any other. */
  function write(command: () => Promise<unknown>): void {
    if (isUsable()) command().catch(setRedisAside)
  }

  /** Lets every waiting request go and look for itself: Redis may not tell it anything anymore. */
  function wakeEveryone(): void {
    // `once` listens for 'error' too, and that event is not a production's.
    for (const key of releases.eventNames().filter((name) => name !== 'error')) releases.emit(key)
  }

  logger.info({ namespace }, 'connecting to Redis for the shared cache')
  // connect() settles once Redis answers or close() interrupts it; 'error' reports outages.
  client.connect().catch(ignore)
  subscriber
    .connect()
    .then(() =>
      subscriber.subscribe(releasedChannel, (key) => releases.emit(key)),
    )
    .then(() => {
      subscribed = true
      logger.info('shared cache ready')
    })
    .catch(ignore)

  return {
    get isAvailable() {
      return isAvailable()
    },
    get(key) {
      return attempt(async () => (await client.get(namespace + key)) ?? undefined, undefined)
    },
    async set(key, value, ttlMs) {
      await attempt(() => client.set(namespace + key, value, { expiration: { type: 'PX', value: Math.max(1, Math.ceil(ttlMs)) } }), undefined)
    },
    delete(key) {
      write(() => client.del(namespace + key))
    },
    async lock(key, ttlMs) {
      // Without the channel, waiting on another replica would be waiting blind: produce alone.
      if (!isAvailable()) return undefined
      const token = randomUUID()
      const taken = await attempt(
        () => client.set(`${namespace}lock:${key}`, token, { condition: 'NX', expiration: { type: 'PX', value: ttlMs } }),
        undefined,
      )
      if (taken === undefined) return undefined
      return taken === null ? false : token
    },
    release(key, token) {
      write(() => client.eval(RELEASE, { keys: [`${namespace}lock:${key}`, releasedChannel], arguments: [token, key] }))
    },
    waitForRelease(key, timeoutMs) {
      const cancelled = new AbortController()
      const signal = AbortSignal.any([cancelled.signal, AbortSignal.timeout(timeoutMs)])
      // A Redis that hangs sends no error: while waiting, ask it now and then whether it still
      // answers, so that a waiter is let go within a probe and a deadline, not FORGE_TIMEOUT_MS.
      const watchdog = setInterval(() => void attempt(() => client.ping(), undefined), probeIntervalMs).unref()
      const done = once(releases, key, { signal })
        .then(
          () => true,
          () => false,
        )
        .finally(() => clearInterval(watchdog))
      return { done, cancel: () => cancelled.abort() }
    },
    rateLimitRedis: client,
    async close() {
      clearInterval(probe)
      wakeEveryone()
      for (const connection of [subscriber, client]) {
        if (!connection.isOpen) continue
        try {
          await withDeadline(connection.close(), deadlineMs, missedDeadline)
        } catch {
          connection.destroy()
        }
      }
    },
  }
}
