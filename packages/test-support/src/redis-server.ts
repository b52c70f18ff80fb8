import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { setPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { eventually, findFreePort } from './process.ts'

/**
 * A private redis-server on a free port, owned by one test file, that a test may stop, restart
 * and freeze. Durable by default: it keeps an append-only file fsynced on every write, as
 * production does, so that a restart keeps every write Redis acknowledged.
 */
export interface PrivateRedis {
  readonly port: number
  start(): Promise<void>
  /**
   * Stops the server and resolves once it has exited: by default outright (SIGKILL), as a crash
   * would; with SIGTERM as an orchestrator does, letting Redis finish its files first.
   */
  stop(signal?: 'SIGKILL' | 'SIGTERM'): Promise<void>
  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void
  resume(): void
  /** Stops the server and deletes its data. */
  dispose(): Promise<void>
}

export interface PrivateRedisOptions {
  /**
   * false: no persistence at all (no AOF, no snapshots), for a cache or a benchmark. An fsync on
   * every write holds each write for the disk, so a durable Redis measures the disk, not its client.
   */
  durable?: boolean
  /** More redis-server arguments, after (and so overriding) those above: `['--requirepass', 'secret']`. */
  args?: string[]
  /** Serve TLS only, on `port`, with this certificate (`createTestCertificates`); clients are not asked for one. */
  tls?: { certFile: string; keyFile: string; caFile: string }
  /**
   * A configuration file's text, written in the server's directory at its first start and read
   * before the arguments: a sentinel needs a file of its own, which it rewrites as it learns.
   */
  config?: string
  /** Runs `redis-server --sentinel` (with `config`) rather than a data node. */
  sentinel?: boolean
}

/** A private Redis, not yet started: for tests of a service that starts before its Redis. */
export async function createPrivateRedis({ durable = true, args: extraArgs = [], tls, config, sentinel = false }: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = await findFreePort()
  const dir = await mkdtemp(join(tmpdir(), 'private-redis-'))
  const configFile = join(dir, 'redis.conf')
  if (config !== undefined) await writeFile(configFile, config)
  let child: ChildProcess | undefined

  const redis: PrivateRedis = {
    port,
    async start() {
      const listen = tls
        ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile, '--tls-auth-clients', 'no']
        : ['--port', String(port)]
      const args = config === undefined ? [] : [configFile, ...(sentinel ? ['--sentinel'] : [])]
      args.push(...listen, '--bind', '127.0.0.1', '--dir', dir)
      if (!sentinel) args.push('--save', '', ...(durable ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']))
      args.push(...extraArgs)
      const started = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] })
      child = started
      givePriority(started)
      await untilReady(started, port).catch((error: unknown) => {
        // One that never became ready is not left running behind the failure.
        started.kill('SIGKILL')
        throw error
      })
    },
    async stop(signal = 'SIGKILL') {
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      const exited = once(child, 'exit')
      child.kill(signal)
      await exited
    },
    pause() {
      child?.kill('SIGSTOP')
    },
    resume() {
      child?.kill('SIGCONT')
    },
    async dispose() {
      await redis.stop()
      await rm(dir, { recursive: true, force: true })
    },
  }
  return redis
}

/** A private Redis, started. */
export async function startPrivateRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  for (let attempt = 1; ; attempt++) {
    const redis = await createPrivateRedis(options)
    try {
      await redis.start()
      return redis
    } catch (error) {
      await redis.dispose()
      // The free port was taken between findFreePort and the server's bind (a test suite beside
      // this one opens connections all the time): another port will do.
      if (!(error instanceof PortTaken) || attempt === 3) throw error
    }
  }
}

/**
 * The name a private sentinel monitors its primary under unless told otherwise: not `mymaster`,
 * the services' default `REDIS_SENTINEL_NAME`, so that a service ignoring that variable cannot
 * find the primary by luck.
 */
const PRIVATE_SENTINEL_NAME = 'test-primary'

export interface PrivateSentinelOptions {
  /** The port of the primary to monitor, on 127.0.0.1. */
  primaryPort: number
  /** The name it is monitored under (`REDIS_SENTINEL_NAME`); `PRIVATE_SENTINEL_NAME` by default. */
  name?: string
  /** Sentinels that must agree the primary is down before a failover. */
  quorum?: number
  /** How long the primary may stay silent before it is deemed down. */
  downAfterMs?: number
  failoverTimeoutMs?: number
}

/**
 * A private Redis Sentinel, not yet started, monitoring a private primary: it finds the
 * primary's replicas and the other sentinels of that primary by itself, and fails over when
 * they agree.
 */
export async function createPrivateSentinel(options: PrivateSentinelOptions): Promise<PrivateRedis> {
  const { primaryPort, name = PRIVATE_SENTINEL_NAME, quorum = 2, downAfterMs = 1_000, failoverTimeoutMs = 3_000 } = options
  const config = [
    `sentinel monitor ${name} 127.0.0.1 ${primaryPort} ${quorum}`,
    `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
    `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
    `sentinel parallel-syncs ${name} 1`,
    '',
  ].join('\n')
  return createPrivateRedis({ config, sentinel: true })
}

/** A private Redis Sentinel (`createPrivateSentinel`), started. */
async function startPrivateSentinel(options: PrivateSentinelOptions): Promise<PrivateRedis> {
  const sentinel = await createPrivateSentinel(options)
  await sentinel.start()
  return sentinel
}

/** A primary, its replicas and the sentinels that watch them, all private and started. */
export interface PrivateSentinelGroup {
  /** The name the sentinels monitor the primary under (`REDIS_SENTINEL_NAME`). */
  readonly name: string
  readonly primary: PrivateRedis
  readonly replicas: readonly PrivateRedis[]
  readonly sentinels: readonly PrivateRedis[]
  /** `REDIS_SENTINELS` for this group. */
  readonly sentinelList: string
  /** The port of the primary the first sentinel names now. */
  primaryPort(): Promise<number>
  /** Stops every server and deletes their data. */
  dispose(): Promise<void>
}

/**
 * `replicas` replicas of a primary (`--replicaof`) and `sentinels` sentinels watching it (quorum:
 * a majority), resolved once every replica is online and every sentinel knows every replica and
 * every other sentinel, so that a failover can start as soon as the primary stops answering.
 */
export async function startPrivateSentinelGroup(
  options: { replicas?: number; sentinels?: number } & Omit<PrivateSentinelOptions, 'primaryPort' | 'quorum'> = {},
): Promise<PrivateSentinelGroup> {
  const { replicas: replicaCount = 2, sentinels: sentinelCount = 3, name = PRIVATE_SENTINEL_NAME, ...timings } = options
  const primary = await startPrivateRedis()
  const replicas = await Promise.all(
    Array.from({ length: replicaCount }, () => startPrivateRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })),
  )
  const servers = [primary, ...replicas]
  const sentinels: PrivateRedis[] = []
  const group: PrivateSentinelGroup = {
    name,
    primary,
    replicas,
    sentinels,
    get sentinelList() {
      return sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(',')
    },
    async primaryPort() {
      const [, port] = (await redisCli(sentinels[0]!.port, 'SENTINEL', 'get-master-addr-by-name', name)).split('\n')
      return Number(port)
    },
    async dispose() {
      await Promise.all([...sentinels, ...servers].map((server) => server.dispose()))
    },
  }
  try {
    const online = await eventually(async () => countOf(await redisCli(primary.port, 'INFO', 'replication'), /^slave\d+:.*state=online/gm) === replicaCount, 200)
    if (!online) throw new Error('the replicas never came online')
    const quorum = Math.floor(sentinelCount / 2) + 1
    for (let index = 0; index < sentinelCount; index++) sentinels.push(await startPrivateSentinel({ primaryPort: primary.port, name, quorum, ...timings }))
    const acquainted = await eventually(async () => {
      const views = await Promise.all(sentinels.map((sentinel) => redisCli(sentinel.port, 'SENTINEL', 'master', name)))
      return views.every((view) => fieldOf(view, 'num-slaves') === replicaCount && fieldOf(view, 'num-other-sentinels') === sentinelCount - 1)
    }, 400)
    if (!acquainted) throw new Error('the sentinels never found every replica and each other')
  } catch (error) {
    await group.dispose()
    throw error
  }
  return group
}

const execFileText = promisify(execFile)

/** One command through `redis-cli`, its answer as text (one line per element); '' when it fails. */
async function redisCli(port: number, ...command: string[]): Promise<string> {
  try {
    return (await execFileText('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...command])).stdout.trim()
  } catch {
    return ''
  }
}

function countOf(text: string, pattern: RegExp): number {
  return text.match(pattern)?.length ?? 0
}

/** A field of a `SENTINEL MASTER` answer, a flat list of names and values. */
function fieldOf(answer: string, field: string): number {
  const lines = answer.split('\n')
  const index = lines.indexOf(field)
  return index === -1 ? Number.NaN : Number(lines[index + 1])
}

/** The server could not bind its port: something else holds it. */
class PortTaken extends Error {}

/** What redis-server prints once it accepts connections: a data node, or a sentinel. */
const READY = /Ready to accept connections|Sentinel ID is/
/** A start from a cold disk on a loaded machine stays well within it. */
const START_TIMEOUT_MS = 30_000

/**
 * Resolves once the server `child` says it accepts connections. Its own word, not a connection
 * that succeeds: something else may answer on `port` (another test's server, if the port was
 * taken between findFreePort and this server's bind, which then exits). Rejects with the server's
 * last lines when it exits first (`PortTaken` when its port was in use), or after 30 s. Its output
 * is read to the end, or a full pipe would stop it.
 */
async function untilReady(child: ChildProcess, port: number): Promise<void> {
  let output = ''
  const { promise, resolve, reject } = Promise.withResolvers<void>()
  const read = (chunk: Buffer) => {
    // The last few lines are enough to say why it stopped.
    output = (output + chunk.toString()).slice(-4_000)
    if (READY.test(output)) resolve()
  }
  child.stdout?.on('data', read)
  child.stderr?.on('data', read)
  const exited = () => {
    const why = `redis-server on port ${port} exited before it was ready:\n${output}`
    reject(/Address already in use/.test(output) ? new PortTaken(why) : new Error(why))
  }
  child.once('exit', exited)
  const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} was not ready within ${START_TIMEOUT_MS} ms:\n${output}`)), START_TIMEOUT_MS)
  try {
    await promise
  } finally {
    clearTimeout(timer)
    child.off('exit', exited)
  }
}

/**
 * The Redis command deadline (`REDIS_DEADLINE_MS`) for a service under a test whose subject is not
 * that deadline: even ahead of the tests' own processes, a private Redis on a machine whose cores
 * were all taken answered past production's 500 ms, the service set it aside as a hung one, and
 * a test of something else failed on time alone. Tests of what the deadline does keep production's.
 */
export const LENIENT_REDIS_DEADLINE_MS = 10_000

/**
 * Runs `server` ahead of the tests' own processes, as production's Redis runs on CPU of its own:
 * on a machine busy with other suites, a Redis waiting its turn behind them answers past the
 * services' 500 ms deadline, which then sets it aside as a hung one (docs/testing.md, *A busy
 * machine*). Raising a priority takes root; elsewhere the server keeps the default.
 */
function givePriority(server: ChildProcess): void {
  if (server.pid === undefined) return
  try {
    setPriority(server.pid, -10)
  } catch {
    // Not root: the default priority.
  }
}
