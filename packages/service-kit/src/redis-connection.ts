import { createClient, type RedisScripts } from 'redis'
import { Gauge, type Registry } from 'prom-client'
import type { FastifyBaseLogger } from 'fastify'
import { withDeadline } from './deadline.ts'

/** ok: Redis answered; error: it refused or could not be reached; timeout: the deadline passed first. */
export type CommandOutcome = 'ok' | 'error' | 'timeout'

/** Where to connect: `REDIS_URL`, or its parts. */
export type RedisTarget = { url: string } | { host: string; port: number; password?: string | undefined; database?: number }

export interface RedisConnectionOptions<Scripts extends RedisScripts> {
  target: RedisTarget
  /** Lua scripts the client may run by name (node-redis `defineScript`). */
  scripts?: Scripts
  logger: FastifyBaseLogger
  /** What the connection is for, in its log lines ("item store", "shared cache"). */
  purpose: string
  /** Longest a command may take; past it the caller gets `RedisUnavailableError` and Redis is set aside. */
  deadlineMs?: number
  /** How often a Redis set aside is asked whether it answers again. */
  probeIntervalMs?: number
  /** Told of every command's outcome and duration, for the service's own metrics. */
  onCommand?: (command: string, outcome: CommandOutcome, seconds: number) => void
  /** A gauge, 1 while Redis answers and 0 otherwise, in the app's registry. */
  up?: { registry: Registry; name: string; help: string }
}

// node-redis's own spelling of "no modules, functions or scripts" is `{}`; anything else types
// `duplicate()` apart from the client it duplicates.
/* eslint-disable @typescript-eslint/no-empty-object-type */
type NoModules = {}
type NoFunctions = {}
type NoScripts = {}
/* eslint-enable @typescript-eslint/no-empty-object-type */

/** A node-redis client with `Scripts`. */
export type RedisClient<Scripts extends RedisScripts = RedisScripts> = ReturnType<typeof createClient<NoModules, NoFunctions, Scripts>>

/** One resilient connection to Redis, as both services use it. */
export interface RedisConnection<Scripts extends RedisScripts = RedisScripts> {
  /** The client, for what `run` does not cover (the rate limit's script). */
  readonly client: RedisClient<Scripts>
  /** Whether Redis answers now: connected, and not set aside for missing a deadline. */
  readonly isAvailable: boolean
  /**
   * `send(client)` under the deadline, reported to `onCommand` as `command`. Rejects with
   * `RedisUnavailableError` at once while Redis is unavailable, when the deadline passes (and
   * Redis is then set aside until a probe gets an answer), or when Redis fails the command.
   */
  run<T>(command: string, send: (client: RedisClient<Scripts>) => Promise<T>): Promise<T>
  /** A second connection with the same settings (a pub/sub subscriber), closed with this one. */
  duplicate(): RedisClient<Scripts>
  /** Lets in-flight commands finish (within the deadline), then closes every connection. */
  close(): Promise<void>
}

/** Thrown by `run` when Redis cannot be reached, fails the command, or does not answer in time. */
export class RedisUnavailableError extends Error {
  override readonly name = 'RedisUnavailableError'
  /** Whether the deadline passed, rather than Redis failing. */
  readonly timedOut: boolean

  constructor(message: string, options: { timedOut?: boolean; cause?: unknown } = {}) {
    super(message, { cause: options.cause })
    this.timedOut = options.timedOut ?? false
  }
}

/** Well under a second, so that a request waiting on Redis answers within 1 s however Redis fails. */
const DEFAULT_DEADLINE_MS = 500
const DEFAULT_PROBE_INTERVAL_MS = 500
/** Reconnect quickly after a restart, without hammering a Redis that stays down. */
const MAX_RECONNECT_DELAY_MS = 500

/**
 * Connects to Redis without waiting for it, reconnects by itself forever, and never makes a
 * caller wait long: commands are not queued while disconnected, every command has a deadline
 * (node-redis's own timeout misses a command already written to a socket that went silent, and
 * costs an AbortSignal per command), and once a command misses it Redis is set aside (commands
 * fail at once) until a probe gets an answer again. An outage is logged once, its end once.
 */
export function createRedisConnection<Scripts extends RedisScripts = NoScripts>(options: RedisConnectionOptions<Scripts>): RedisConnection<Scripts> {
  const { logger, purpose, onCommand, deadlineMs = DEFAULT_DEADLINE_MS, probeIntervalMs = DEFAULT_PROBE_INTERVAL_MS } = options
  const socket = { connectTimeout: 1_000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS) }
  const { target } = options
  const client = createClient<NoModules, NoFunctions, Scripts>({
    ...('url' in target
      ? { url: target.url, socket }
      : {
          socket: { ...socket, host: target.host, port: target.port },
          ...(target.password === undefined ? {} : { password: target.password }),
          database: target.database ?? 0,
        }),
    disableOfflineQueue: true,
    commandOptions: { timeout: 0 },
    ...(options.scripts ? { scripts: options.scripts } : {}),
  })
  const duplicates: RedisClient<Scripts>[] = []
  // Where we connect, for the logs: never the URL itself, which may hold a password.
  const where = { purpose, ...redactedTarget(target) }
  let setAside = false
  let probe: NodeJS.Timeout | undefined
  let outageReported = false

  const missedDeadline = () => new RedisUnavailableError(`Redis did not answer within ${deadlineMs} ms`, { timedOut: true })
  const isAvailable = () => client.isReady && !setAside

  function reportOutage(error: unknown): void {
    if (outageReported) return
    outageReported = true
    logger.warn({ ...where, err: error }, 'Redis unavailable; reconnecting in the background')
  }

  function reportRecovery(): void {
    logger.info(where, 'Redis connection ready')
    outageReported = false
  }

  function setRedisAside(error: RedisUnavailableError): void {
    reportOutage(error)
    if (setAside) return
    setAside = true
    probe = setInterval(() => {
      withDeadline(client.ping(), deadlineMs, missedDeadline).then(() => {
        if (!setAside) return
        setAside = false
        clearInterval(probe)
        reportRecovery()
      }, ignore)
    }, probeIntervalMs).unref()
  }

  // Without an 'error' listener a socket error would crash the process.
  client.on('error', reportOutage)
  client.on('ready', () => {
    if (!setAside) reportRecovery()
  })
  if (options.up) {
    new Gauge({ name: options.up.name, help: options.up.help, registers: [options.up.registry], collect() {
      this.set(isAvailable() ? 1 : 0)
    } })
  }
  logger.info(where, 'connecting to Redis')
  // connect() settles once Redis answers, or rejects when close() interrupts it; the 'error'
  // listener reports outages, so neither outcome needs handling here.
  client.connect().catch(ignore)

  async function run<T>(command: string, send: (client: RedisClient<Scripts>) => Promise<T>): Promise<T> {
    const started = performance.now()
    const report = (outcome: CommandOutcome) => onCommand?.(command, outcome, (performance.now() - started) / 1000)
    if (!isAvailable()) {
      report('error')
      throw new RedisUnavailableError('Redis is not available')
    }
    try {
      const value = await withDeadline(send(client), deadlineMs, missedDeadline)
      report('ok')
      return value
    } catch (error) {
      if (error instanceof RedisUnavailableError) {
        report('timeout')
        setRedisAside(error)
        throw error
      }
      report('error')
      throw new RedisUnavailableError('Redis command failed', { cause: error })
    }
  }

  return {
    client,
    get isAvailable() {
      return isAvailable()
    },
    run,
    duplicate() {
      const duplicate = client.duplicate()
      duplicate.on('error', ignore)
      duplicates.push(duplicate)
      return duplicate
    },
    async close() {
      clearInterval(probe)
      for (const connection of [...duplicates, client]) {
        if (!connection.isOpen) continue
        try {
          await withDeadline(connection.close(), deadlineMs, missedDeadline)
        } catch {
          connection.destroy()
        }
      }
      logger.info(where, 'Redis connection closed')
    },
  }
}

/** For promises whose failure is reported elsewhere (the 'error' listener) or is the answer itself. */
function ignore(): void {}

function redactedTarget(target: RedisTarget): Record<string, unknown> {
  if (!('url' in target)) return { host: target.host, port: target.port, database: target.database ?? 0 }
  const { protocol, host, pathname } = new URL(target.url)
  return { url: `${protocol}//${host}${pathname}` }
}
