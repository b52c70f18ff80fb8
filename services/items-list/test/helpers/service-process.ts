import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

const SERVICE_ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface ServiceProcess {
  child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  /** Resolves with the first match of `pattern` in the output, waiting for it to appear. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>
}

/** Runs `src/server.ts` as `pnpm start` does, with exactly `env` (plus PATH). */
export function runServer(env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, ['--conditions=@repo/source', 'src/server.ts'], {
    cwd: SERVICE_ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const listeners = new Set<() => void>()
  const append = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  const exited = once(child, 'exit').then(([code]) => code as number | null)

  return {
    child,
    output: () => output,
    exited,
    waitFor(pattern, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = output.match(pattern)
          if (!match) return
          cleanup()
          resolve(match)
        }
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`no ${String(pattern)} in output:\n${output}`))
        }, timeoutMs)
        const cleanup = () => {
          clearTimeout(timer)
          listeners.delete(check)
        }
        listeners.add(check)
        check()
      })
    },
  }
}
