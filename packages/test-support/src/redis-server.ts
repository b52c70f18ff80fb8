import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { eventually, findFreePort, isListening } from './process.ts'

/**
 * A private redis-server on a free port, owned by one test file, that a test may stop, restart
 * and freeze. Durable by default: it keeps an append-only file fsynced on every write, as
 * production does, so that a restart keeps every write Redis acknowledged.
 */
export interface PrivateRedis {
  readonly port: number
  start(): Promise<void>
  /** Kills the server outright (SIGKILL), as a crash would. */
  stop(): Promise<void>
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
}

/** A private Redis, not yet started: for tests of a service that starts before its Redis. */
export async function createPrivateRedis({ durable = true, args: extraArgs = [] }: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = await findFreePort()
  const dir = await mkdtemp(join(tmpdir(), 'private-redis-'))
  let child: ChildProcess | undefined

  const redis: PrivateRedis = {
    port,
    async start() {
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '']
      args.push(...(durable ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']), ...extraArgs)
      child = spawn('redis-server', args, { stdio: 'ignore' })
      await waitUntilListening(port)
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      const exited = once(child, 'exit')
      child.kill('SIGKILL')
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
  const redis = await createPrivateRedis(options)
  await redis.start()
  return redis
}

async function waitUntilListening(port: number): Promise<void> {
  if (!(await eventually(() => isListening(port)))) throw new Error(`redis-server did not listen on port ${port}`)
}
