import { spawn } from 'node:child_process'
import { once } from 'node:events'

/** What promtool answered: its exit code and everything it wrote. */
export interface PromtoolRun {
  code: number | null
  output: string
}

/**
 * Why the promtool tests cannot run here (the reason to skip them), or `false` when they can.
 * promtool comes from Debian's `prometheus` package, which `.ci/run` installs: in CI
 * (`CI=true`) a missing promtool is an error, not a skip. A promtool that is there but does not
 * answer `--version` is asked once more (a machine at its process limit may refuse one start),
 * then reported with what it said, since a skip would hide a broken install.
 */
export async function whyNoPromtool(command = 'promtool', env: NodeJS.ProcessEnv = process.env): Promise<string | false> {
  let failure = ''
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const { code, output } = await runPromtool(['--version'], undefined, command)
      if (code === 0) return false
      failure = `exit code ${String(code)}: ${output.trim()}`
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') failure = String(error)
      else return absent(command, env)
    }
  }
  throw new Error(`${command} is installed but does not answer --version (${failure})`)
}

function absent(command: string, env: NodeJS.ProcessEnv): string {
  const reason = `no ${command} here (apt-get install prometheus)`
  if (env.CI === 'true') throw new Error(`${reason}, and CI requires it`)
  return reason
}

/** Runs promtool with `args`, `input` on its stdin; rejects only when it cannot be started. */
export async function runPromtool(args: readonly string[], input?: string, command = 'promtool'): Promise<PromtoolRun> {
  // stdout and stderr are always pipes; stdin only when there is input.
  const child = spawn(command, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  // A promtool that exits before reading all its input (EPIPE) answers with its exit code and output.
  child.stdin?.on('error', () => {})
  child.stdin?.end(input)
  const [code] = (await once(child, 'close')) as [number | null]
  return { code, output }
}

/**
 * `promtool check metrics` on a `/metrics` page: its findings, one per line (`name message`);
 * none when the page lints clean.
 */
export async function metricsFindings(page: string, command = 'promtool'): Promise<string[]> {
  const { output } = await runPromtool(['check', 'metrics'], page, command)
  return output.split('\n').filter((line) => line.trim() !== '')
}
