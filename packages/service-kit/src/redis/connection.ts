// `createRedisConnection`: the one way both services talk to Redis, direct or through Sentinel,
// with a deadline on every command so that a Redis down or stalled never holds a request up.
import { createClient, createSentinel, type RedisScripts } from 'redis'
import { Gauge, type Registry } from 'prom-client'
import type { FastifyBaseLogger } from 'fastify'
import { withDeadline } from './deadline.ts'
import { clientOptions, redactedTarget, sentinelOptions, type RedisAuth, type RedisNodeTarget, type RedisSentinelTarget, type RedisTarget } from './location.ts'

/** ok: Redis answered; error: it refused or could not be reached; timeout: the deadline passed first. */
export type CommandOutcome = 'ok' | 'error' | 'timeout'

export interface RedisConnectionOptions<Scripts extends RedisScripts> {
  target: RedisTarget
  /** Lua scripts the client may run by name (node-redis `defineScript`). */
  scripts?: Scripts
  logger: FastifyBaseLogger
  /** What the connection is for, in its log lines ("item store", "shared cache"). */
  purpose: string
  /**
   * Longest Redis may take to answer a command, counted from when it is written (docs/design.md,
   * "The Redis command deadline"); past it the caller gets `RedisUnavailableError` and Redis is set aside.
   */
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
/** A node-redis Sentinel client with `Scripts`: it sends each command to the current primary. */
export type RedisSentinelClient<Scripts extends RedisScripts = RedisScripts> = ReturnType<typeof createSentinel<NoModules, NoFunctions, Scripts>>
/** What commands are sent through: a client, or a Sentinel client, which has the same commands. */
export type RedisCommands<Scripts extends RedisScripts = RedisScripts> = RedisClient<Scripts> | RedisSentinelClient<Scripts>

/** A second connection for pub/sub (`duplicate()`): what a client and a Sentinel client share. */
export interface RedisSubscriber {
  readonly isReady: boolean
  readonly isOpen: boolean
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>
  on(event: 'error', listener: (error: unknown) => void): unknown
  /** Connected again (node-redis subscribes again by itself; what was published meanwhile is lost). */
  on(event: 'ready', listener: () => void): unknown
}

/** One resilient connection to Redis, as both services use it. */
export interface RedisConnection<Scripts extends RedisScripts = RedisScripts> {
  /** The client, for what `run` does not cover (the rate limit's script). */
  readonly client: RedisCommands<Scripts>
  /** Whether Redis answers now: connected, and not set aside for missing a deadline. */
  readonly isAvailable: boolean
  /** Longest a command may take (a `WAIT` must end well within it). */
  readonly deadlineMs: number
  /**
   * Goes up whenever the connection drops, is made again or is moved to another server (a
   * restart, a Sentinel failover): Redis may then hold less than it did, so whatever a caller
   * kept of what it read before is not to be trusted past a change.
   */
  readonly epoch: number
  /**
   * `send(client)` under the deadline, reported to `onCommand` as `command`. Rejects with
   * `RedisUnavailableError` at once while Redis is unavailable, when the deadline passes (and
   * Redis is then set aside until a probe gets an answer), or when Redis fails the command.
   */
  run<T>(command: string, send: (client: RedisCommands<Scripts>) => Promise<T>): Promise<T>
  /** A second connection with the same settings (a pub/sub subscriber), closed with this one. */
  duplicate(): RedisSubscriber
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
/** What the socket takes before node-redis waits for it to drain: 1 MiB, a burst of thousands of appends. */
const WRITE_BUFFER_BYTES = 1 << 20
// A burst of commands is written to the socket at once: node-redis stops writing when the socket's
// buffer is full and waits for 'drain', and a command kept back that way, behind the process's own
// work, would run out its deadline before Redis had seen it (docs/design.md, "The Redis command deadline").
const SOCKET = {
  connectTimeout: 1_000,
  writableHighWaterMark: WRITE_BUFFER_BYTES,
  reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS),
}

/**
 * Connects to Redis without waiting for it, reconnects by itself forever, and never makes a
 * caller wait long: commands are not queued while disconnected, every command has a deadline on
 * Redis's own time (node-redis's own timeout misses a command already written to a socket that
 * went silent, costs an AbortSignal per command, and counts the time a busy process takes to
 * write the command and read its answer), and once a command misses it Redis is set aside
 * (commands fail at once) until a probe gets an answer again. An outage is logged once, its end once.
 */
export function createRedisConnection<Scripts extends RedisScripts = NoScripts>(options: RedisConnectionOptions<Scripts>): RedisConnection<Scripts> {
  const { logger, purpose, onCommand, target, deadlineMs = DEFAULT_DEADLINE_MS, probeIntervalMs = DEFAULT_PROBE_INTERVAL_MS } = options
  const client: RedisCommands<Scripts> = 'sentinels' in target ? createSentinelClient(target, options.scripts) : createNodeClient(target, options.scripts)
  const duplicates: RedisCommands<Scripts>[] = []
  const where = { purpose, ...redactedTarget(target) }
  const missedDeadline = () => new RedisUnavailableError(`Redis did not answer within ${deadlineMs} ms`, { timedOut: true })
  const health = createHealth(client, { logger, where, deadlineMs, probeIntervalMs, missedDeadline })
  const epochs = countEpochs(client, health)
  if (options.up) registerUpGauge(options.up, health.isAvailable)
  logger.info(where, 'connecting to Redis')
  const connecting = keepConnecting(client, 'sentinels' in target, health.reportOutage)

  async function run<T>(command: string, send: (client: RedisCommands<Scripts>) => Promise<T>): Promise<T> {
    const started = performance.now()
    const report = (outcome: CommandOutcome) => onCommand?.(command, outcome, (performance.now() - started) / 1000)
    if (!health.isAvailable()) {
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
        health.setAside(error)
        throw error
      }
      report('error')
      throw new RedisUnavailableError('Redis command failed', { cause: error })
    }
  }

  return {
    client,
    get isAvailable() {
      return health.isAvailable()
    },
    deadlineMs,
    get epoch() {
      return epochs.current
    },
    run,
    duplicate() {
      // A subscriber sends no command of its own: the pool's second connection, kept for `use`, would idle.
      const duplicate: RedisCommands<Scripts> = 'use' in client ? client.duplicate({ masterPoolSize: 1 }) : client.duplicate()
      duplicate.on('error', ignore)
      duplicates.push(duplicate)
      return duplicate
    },
    async close() {
      connecting.stop()
      health.stop()
      for (const connection of [...duplicates, client]) {
        if (!connection.isOpen) continue
        try {
          await withDeadline(connection.close(), deadlineMs, missedDeadline)
        } catch {
          await connection.destroy()
        }
      }
      logger.info(where, 'Redis connection closed')
    },
  }
}

interface HealthSettings {
  logger: FastifyBaseLogger
  /** The connection's purpose and redacted target, on every log line. */
  where: object
  deadlineMs: number
  probeIntervalMs: number
  missedDeadline: () => RedisUnavailableError
}

/**
 * Whether Redis answers: connected, and not set aside. A command that missed its deadline sets
 * Redis aside (commands then fail at once, rather than each wait out the deadline) until a probe
 * gets an answer in time. An outage is logged once, its end once.
 */
function createHealth(client: RedisCommands<RedisScripts>, { logger, where, deadlineMs, probeIntervalMs, missedDeadline }: HealthSettings) {
  let setAside = false
  let probe: NodeJS.Timeout | undefined
  let outageReported = false

  function reportOutage(error: unknown): void {
    if (outageReported) return
    outageReported = true
    logger.warn({ ...where, err: error }, 'Redis unavailable; reconnecting in the background')
  }

  function reportRecovery(): void {
    logger.info(where, 'Redis connection ready')
    outageReported = false
  }

  return {
    isAvailable: () => client.isReady && !setAside,
    isSetAside: () => setAside,
    reportOutage,
    reportRecovery,
    setAside(error: RedisUnavailableError): void {
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
    },
    stop: () => clearInterval(probe),
  }
}

/**
 * The connection's epoch (`RedisConnection.epoch`): up by one at every drop, reconnection or move
 * to another server. The 'error' listener also keeps a socket error from crashing the process.
 */
function countEpochs(client: RedisCommands<RedisScripts>, health: ReturnType<typeof createHealth>): { readonly current: number } {
  let epoch = 0
  const moved = () => void epoch++
  client.on('error', (error: unknown) => {
    moved()
    health.reportOutage(error)
  })
  client.on('ready', () => {
    moved()
    if (!health.isSetAside()) health.reportRecovery()
  })
  for (const event of ['end', 'reconnecting', 'topology-change']) client.on(event, moved)
  return {
    get current() {
      return epoch
    },
  }
}

function registerUpGauge(up: NonNullable<RedisConnectionOptions<RedisScripts>['up']>, isAvailable: () => boolean): void {
  new Gauge({ name: up.name, help: up.help, registers: [up.registry], collect() {
    this.set(isAvailable() ? 1 : 0)
  } })
}

/**
 * Connects in the background until closed. A client's connect() rejects only when close()
 * interrupts it: it retries by itself. A Sentinel client's gives up when no sentinel can name a
 * reachable primary, and must be asked again, or the service would never find its Redis once the
 * sentinels are back.
 */
function keepConnecting(client: RedisCommands<RedisScripts>, throughSentinel: boolean, reportOutage: (error: unknown) => void): { stop(): void } {
  let closing = false
  let reconnect: NodeJS.Timeout | undefined
  function connect(): void {
    client.connect().catch((error: unknown) => {
      if (closing || !throughSentinel) return
      reportOutage(error)
      reconnect = setTimeout(connect, MAX_RECONNECT_DELAY_MS).unref()
    })
  }
  connect()
  return {
    stop() {
      closing = true
      clearTimeout(reconnect)
    },
  }
}

/** For promises whose failure is reported elsewhere (the 'error' listener) or is the answer itself. */
function ignore(): void {}

/**
 * A client to one server that queues nothing while disconnected, leaves the deadline to `run`,
 * and reconnects quickly.
 */
function createNodeClient<Scripts extends RedisScripts>(target: RedisNodeTarget, scripts: Scripts | undefined): RedisClient<Scripts> {
  const location = clientOptions(target)
  return createClient<NoModules, NoFunctions, Scripts>({
    ...location,
    socket: { ...SOCKET, ...location.socket },
    disableOfflineQueue: true,
    commandOptions: { timeout: 0 },
    ...(scripts ? { scripts } : {}),
  })
}

/**
 * A Sentinel client whose data-node connections behave as a client's do, and whose node errors
 * reach the one 'error' listener, so that an outage is logged once whatever node failed.
 *
 * Its ordinary commands go through one connection to the primary reserved for them, as a
 * client's do. Unreserved, each command leases a connection from the pool, and a lease taken while
 * no command is in flight goes back only when that command is answered: a cold burst then went out
 * one round trip at a time (2,000 SETs in 410–800 ms against 31–50 ms on a client, near or past
 * the deadline; docs/design.md, "The Redis command deadline"). The pool's second connection is
 * for `use`, whose exclusive lease would otherwise wait forever behind the reserved one.
 */
function createSentinelClient<Scripts extends RedisScripts>(target: RedisSentinelTarget & RedisAuth, scripts: Scripts | undefined): RedisSentinelClient<Scripts> {
  const location = sentinelOptions(target)
  return createSentinel<NoModules, NoFunctions, Scripts>({
    ...location,
    nodeClientOptions: { ...location.nodeClientOptions, socket: SOCKET, disableOfflineQueue: true },
    sentinelClientOptions: { socket: { connectTimeout: SOCKET.connectTimeout } },
    passthroughClientErrorEvents: true,
    reserveClient: true,
    masterPoolSize: 2,
    commandOptions: { timeout: 0 },
    ...(scripts ? { scripts } : {}),
  })
}
