/**
 * The processes a forge-aggregator bench starts, each on a free port of 127.0.0.1, its stdout (the
 * access log) going to /dev/null as a container's log pipe is read by another process, and all
 * stopped when the bench ends, however it ends.
 */
import { fileURLToPath } from 'node:url'
import { eventually, findFreePort, nodePath, runProcess, runServiceSource, type RunningProcess } from '@repo/test-support'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))

export interface Server {
  url: string
  process: RunningProcess
}

const running = new Set<RunningProcess>()
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopEveryServer()
    process.exit(1)
  })
}

/**
 * Runs `entry` with PORT and `env` as its only settings, and resolves once `readyPath` answers
 * 200. A `dist/` entry runs as the image runs it: plain Node on the build.
 */
export async function startServer(name: string, entry: string, env: Record<string, string>, readyPath: string): Promise<Server> {
  const port = await findFreePort()
  const settings = { PORT: String(port), HOST: '127.0.0.1', SHUTDOWN_DELAY_SECONDS: '0', ...env }
  const started = entry.startsWith('dist/')
    ? runProcess('node', [entry], { cwd: SERVICE_ROOT, env: { PATH: nodePath(), NODE_ENV: 'production', ...settings }, discardStdout: true })
    : runServiceSource(SERVICE_ROOT, settings, entry, { discardStdout: true })
  running.add(started)
  const url = `http://127.0.0.1:${port}`
  const ready = async () => (await fetch(`${url}${readyPath}`).catch(() => undefined))?.ok === true
  // 200 polls of 50 ms: a cold start on a busy machine takes a few seconds.
  if ((await eventually(async () => started.child.exitCode !== null || (await ready()), 200)) && started.child.exitCode === null) {
    return { url, process: started }
  }
  started.child.kill('SIGKILL')
  throw new Error(`${name} did not start:\n${started.output()}`)
}

/** Stops every server still running, at once. */
export function stopEveryServer(): void {
  for (const server of running) server.child.kill('SIGKILL')
  running.clear()
}
