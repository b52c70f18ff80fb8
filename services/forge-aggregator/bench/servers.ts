/**
 * The processes a forge-aggregator bench starts (the service, its fake upstream, a bare route),
 * each on a free port of 127.0.0.1, and stopped when the bench ends, however it ends.
 */
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { eventually, findFreePort, nodePath, runProcess, runServiceSource, type RunningProcess } from '@repo/test-support'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))

/** A server a bench started, and where it answers. */
export interface Server {
  process: RunningProcess
  url: string
}

const running = new Set<RunningProcess>()

// An interrupted bench leaves no server behind.
for (const [signal, number] of [
  ['SIGINT', 2],
  ['SIGTERM', 15],
] as const) {
  process.once(signal, () => {
    killEveryServer()
    process.exit(128 + number)
  })
}

/**
 * Runs `entry` on a free port (PORT and `env` its only settings) and resolves once `readyPath`
 * answers 200. A `dist/` entry runs as the image runs it: plain Node on the build. The service's
 * stdout, its log, goes to /dev/null: a container's log pipe is read by another process, not by
 * the one generating the load.
 */
export async function startServer(label: string, entry: string, env: Record<string, string>, readyPath: string): Promise<Server> {
  const port = await findFreePort()
  const url = `http://127.0.0.1:${port}`
  const isService = entry !== 'bench/fake-upstream.ts'
  // A bench stops its servers at once: nothing balances between them.
  if (isService) env = { SHUTDOWN_DELAY_SECONDS: '0', ...env }
  const server = entry.startsWith('dist/')
    ? runProcess('node', [entry], { cwd: SERVICE_ROOT, env: { PATH: nodePath(), NODE_ENV: 'production', PORT: String(port), ...env }, discardStdout: true })
    : runServiceSource(SERVICE_ROOT, { PORT: String(port), ...env }, entry, { discardStdout: isService })
  running.add(server)
  const ready = async () => {
    const response = await request(`${url}${readyPath}`).catch(() => undefined)
    await response?.body.dump()
    return response?.statusCode === 200
  }
  // 200 polls of 50 ms: a cold start on a busy machine takes a few seconds.
  if ((await eventually(async () => server.child.exitCode !== null || (await ready()), 200)) && server.child.exitCode === null) {
    return { process: server, url }
  }
  await stop({ process: server, url })
  throw new Error(`${label} did not start:\n${server.output()}`)
}

export async function stop({ process: server }: Server): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGTERM')
    await server.exited
  }
  running.delete(server)
}

/** Stops every server still running, at once: for the end of a bench. */
export function killEveryServer(): void {
  for (const server of running) server.child.kill('SIGKILL')
}
