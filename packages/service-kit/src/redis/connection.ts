import { readFileSync } from 'node:fs'
import { createClient, createSentinel, type RedisClientOptions, type RedisScripts } from 'redis'
import { Gauge, type Registry } from 'prom-client'
import type { FastifyBaseLogger } from 'fastify'
import { ConfigError } from '@repo/config'
import { withDeadline } from './deadline.ts'

/** ok: Redis answered; error: it refused or could not be reached; timeout: the deadline passed first. */
export type CommandOutcome = 'ok' | 'error' | 'timeout'

/**
 * Who connects, and whom it trusts: the same for every kind of target (`REDIS_USERNAME`,
 * `REDIS_PASSWORD`, `REDIS_CA_FILE`). A username or password written in a URL wins over these.
 * With Sentinel they are given to the data nodes (the primary and its replicas), not to the sentinels.
 */
export interface RedisAuth {
  /** The ACL user; `default` when only a password is given. */
  username?: string | undefined
  password?: string | undefined
  /** A PEM file of the CA that signed Redis's certificate (a private CA); only with TLS (`rediss://`). */
  caFile?: string | undefined
}

/** A primary found through Redis Sentinel (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`), followed across failovers. */
export interface RedisSentinelTarget {
  sentinels: Array<{ host: string; port: number }>
  /** The name the sentinels monitor the primary under. */
  name: string
  database?: number
}

/** One Redis server: `REDIS_URL`, or its parts. */
export type RedisNodeTarget = ({ url: string } | { host: string; port: number; database?: number }) & RedisAuth

/** Where to connect: one server, or the sentinels that know the primary; with the credentials and CA of every kind. */
export type RedisTarget = RedisNodeTarget | (RedisSentinelTarget & RedisAuth)

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

/**
 * Connects to Redis without waiting for it, reconnects by itself forever, and never makes a
 * caller wait long: commands are not queued while disconnected, every command has a deadline on
 * Redis's own time (node-redis's own timeout misses a command already written to a socket that
 * went silent, costs an AbortSignal per command, and counts the time a busy process takes to
 * write the command and read its answer), and once a command misses it Redis is set aside
 * (commands fail at once) until a probe gets an answer again. An outage is logged once, its end once.
 */
export function createRedisConnection<Scripts extends RedisScripts = NoScripts>(options: RedisConnectionOptions<Scripts>): RedisConnection<Scripts> {
  const { logger, purpose, onCommand, deadlineMs = DEFAULT_DEADLINE_MS, probeIntervalMs = DEFAULT_PROBE_INTERVAL_MS } = options
  const { target } = options
  const client: RedisCommands<Scripts> = 'sentinels' in target
    ? createSentinelClient(target, options.scripts)
    : createClient<NoModules, NoFunctions, Scripts>({
        ...clientOptions(target),
        disableOfflineQueue: true,
        commandOptions: { timeout: 0 },
        ...(options.scripts ? { scripts: options.scripts } : {}),
      })
  const duplicates: RedisCommands<Scripts>[] = []
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
  let closing = false
  let reconnect: NodeJS.Timeout | undefined
  function connect(): void {
    client.connect().catch((error: unknown) => {
      // A client's connect() rejects only when close() interrupts it: it retries by itself. A
      // Sentinel client's gives up when no sentinel can name a reachable primary, and must be
      // asked again, or the service would never find its Redis once the sentinels are back.
      if (closing || !('sentinels' in target)) return
      reportOutage(error)
      reconnect = setTimeout(connect, MAX_RECONNECT_DELAY_MS).unref()
    })
  }
  connect()

  async function run<T>(command: string, send: (client: RedisCommands<Scripts>) => Promise<T>): Promise<T> {
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
    deadlineMs,
    run,
    duplicate() {
      const duplicate: RedisCommands<Scripts> = client.duplicate()
      duplicate.on('error', ignore)
      duplicates.push(duplicate)
      return duplicate
    },
    async close() {
      closing = true
      clearInterval(probe)
      clearTimeout(reconnect)
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

const SOCKET = { connectTimeout: 1_000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, MAX_RECONNECT_DELAY_MS) }

/**
 * node-redis's options for `target`: where, as whom, and whom to trust, with this module's
 * connect timeout and reconnection back-off. Reads the CA file now, so that a missing one stops
 * the start rather than every connection: throws `ConfigError` naming `REDIS_CA_FILE` when it
 * cannot be read or is given without TLS (it would be silently ignored).
 */
export function clientOptions(target: RedisNodeTarget): Pick<RedisClientOptions, 'url' | 'socket' | 'username' | 'password' | 'database' | 'disableClientInfo'> {
  const tls = 'url' in target && new URL(target.url).protocol === 'rediss:'
  const socket = { ...SOCKET, ...trustOf(target.caFile, tls) }
  return {
    ...('url' in target ? { url: target.url, socket } : { socket: { ...socket, host: target.host, port: target.port }, database: target.database ?? 0 }),
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    // CLIENT SETINFO only labels the connection, and Redis before 7.2 has no such command: the
    // services' ACL users are not given CLIENT (docs/design.md, *Redis ACLs and the
    // append-only file*), so every connection would log a denial.
    disableClientInfo: true,
  }
}

/** Node's own trust store unless a CA file is given; then that CA alone. */
function trustOf(caFile: string | undefined, tls: boolean): { tls?: true; ca?: string } {
  if (caFile === undefined) return {}
  if (!tls) throw new ConfigError(['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
  try {
    return { tls: true, ca: readFileSync(caFile, 'utf8') }
  } catch (error) {
    // Every error readFileSync throws has a code (ENOENT, EACCES, EISDIR…); its message would show the path.
    throw new ConfigError([`REDIS_CA_FILE cannot be read (${String((error as NodeJS.ErrnoException).code)})`])
  }
}

/** For promises whose failure is reported elsewhere (the 'error' listener) or is the answer itself. */
function ignore(): void {}

/**
 * A Sentinel client whose data-node connections behave as a client's do (no offline queue, quick
 * reconnection, the credentials), and whose node errors reach the one 'error' listener, so that an
 * outage is logged once whatever node failed.
 */
function createSentinelClient<Scripts extends RedisScripts>(target: RedisSentinelTarget & RedisAuth, scripts: Scripts | undefined): RedisSentinelClient<Scripts> {
  // TLS needs the URL form: a CA file here would be trusted by nothing.
  trustOf(target.caFile, false)
  return createSentinel<NoModules, NoFunctions, Scripts>({
    name: target.name,
    sentinelRootNodes: target.sentinels,
    nodeClientOptions: {
      socket: SOCKET,
      disableOfflineQueue: true,
      database: target.database ?? 0,
      ...(target.username === undefined ? {} : { username: target.username }),
      ...(target.password === undefined ? {} : { password: target.password }),
      // As in clientOptions: the services' ACL users are not given CLIENT.
      disableClientInfo: true,
    },
    sentinelClientOptions: { socket: { connectTimeout: SOCKET.connectTimeout } },
    passthroughClientErrorEvents: true,
    commandOptions: { timeout: 0 },
    ...(scripts ? { scripts } : {}),
  })
}

function redactedTarget(target: RedisTarget): Record<string, unknown> {
  const user = target.username === undefined ? {} : { username: target.username }
  if ('sentinels' in target) {
    return { sentinels: target.sentinels.map(({ host, port }) => `${host}:${port}`), name: target.name, database: target.database ?? 0, ...user }
  }
  if (!('url' in target)) return { host: target.host, port: target.port, database: target.database ?? 0, ...user }
  const { protocol, host, pathname } = new URL(target.url)
  return { url: `${protocol}//${host}${pathname}`, ...user }
}
