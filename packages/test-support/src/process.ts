// Running a service or a command the way production runs it, in a process of its own with only
// the environment given, and waiting for it to listen.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo } from 'node:net'
import { delimiter, dirname } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitForFound } from './waiting.ts'

/** A process a test started, with everything it wrote. */
export interface RunningProcess {
  child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  /**
   * Resolves with the first match of `pattern` in the output, waiting for it to appear
   * (`WAIT_FOR_OUTPUT_MS` by default).
   */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Resolves with the exit code once the process has exited and all its output is read (null when a signal ended it). */
  exited: Promise<number | null>
}

/**
 * How long `waitFor` waits unless told: a service started from its TypeScript sources on a CI
 * machine running other test suites beside it took more than 10 s to print its first line, and
 * more than 30 s at load 17 on 2 cores. How soon a process starts is no test's rule; a test whose
 * rule is how soon something is printed passes its own bound, counted from a line printed first.
 */
export const WAIT_FOR_OUTPUT_MS = 120_000

/** The line Fastify logs once it listens on 127.0.0.1; the first group is the port. */
export const LISTENING = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/

/**
 * Runs a service's `src/server.ts` (or another `entry`) as `pnpm start` does: Node 24, workspace
 * packages from their sources, with only `env` and PATH. Started from this process, so that the
 * test runner follows it (its coverage counts).
 */
export function runServiceSource(
  root: string,
  env: Record<string, string>,
  entry = 'src/server.ts',
  options: {
    /**
     * Its stdout goes to /dev/null, read by nobody, as a container's log pipe is read by another
     * process: a benchmark's load generator would otherwise spend its own CPU reading every access line.
     */
    discardStdout?: boolean
  } = {},
): RunningProcess {
  const child = spawn(process.execPath, ['--conditions=@repo/source', entry], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', options.discardStdout ? 'ignore' : 'pipe', 'pipe'],
  })
  return watch(child)
}

/**
 * Runs `command` with exactly `env` (through `env -i`: a test runner's hooks, such as tap's
 * NODE_OPTIONS, cannot reach it), as a container would run it. `node` means this test's Node 24.
 */
export function runProcess(
  command: string,
  args: string[],
  options: {
    cwd: string
    env: Record<string, string>
    /** Its own process group, to stop it with all it started. */
    detached?: boolean
    /** Its stdout goes to /dev/null (see `runServiceSource`). */
    discardStdout?: boolean
  },
): RunningProcess {
  const executable = command === 'node' ? process.execPath : command
  const assignments = Object.entries(options.env).map(([key, value]) => `${key}=${value}`)
  const child = spawn('env', ['-i', ...assignments, executable, ...args], {
    cwd: options.cwd,
    stdio: ['ignore', options.discardStdout ? 'ignore' : 'pipe', 'pipe'],
    detached: options.detached ?? false,
  })
  return watch(child)
}

/** PATH with this test's Node 24 first and no node_modules/.bin directory. */
export function nodePath(): string {
  const rest = (process.env.PATH ?? '').split(delimiter).filter((entry) => !/[\\/]node_modules[\\/]\.bin$/.test(entry))
  return [dirname(process.execPath), ...rest].join(delimiter)
}

function watch(child: ChildProcess): RunningProcess {
  let output = ''
  const listeners = new Set<() => void>()
  const append = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  // 'close', not 'exit': the process may exit before its output has been read to the end.
  const exited = once(child, 'close').then(([code]) => code as number | null)

  return {
    child,
    output: () => output,
    exited,
    waitFor: (pattern, timeoutMs = WAIT_FOR_OUTPUT_MS) =>
      waitForFound(listeners, () => output.match(pattern) ?? undefined, timeoutMs, () => `no ${String(pattern)} in output:\n${output}`),
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` right now. */
export function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** A TCP port on 127.0.0.1 that nothing listened on a moment ago. */
export async function findFreePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  // Listening on TCP: its address is an AddressInfo, never a pipe's name.
  const { port } = server.address() as AddressInfo
  server.close()
  return port
}

/** Polls every `intervalMs` until `condition` holds; false if it never did within `attempts`. */
export async function eventually(condition: () => Promise<boolean>, attempts = 100, intervalMs = 50): Promise<boolean> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (await condition()) return true
    await sleep(intervalMs)
  }
  return false
}

/** Resolves once `url` answers `status`; rejects after about 5 s. */
export async function waitForStatus(url: string, status: number): Promise<void> {
  const answered = await eventually(async () => (await fetch(url).catch(() => undefined))?.status === status)
  if (!answered) throw new Error(`${url} never answered ${status}`)
}
