import { fileURLToPath } from 'node:url'
import { LISTENING, eventually, findFreePort, isListening, runServiceSource, type RunningProcess } from '@repo/test-support'

// By path, not as workspace dependencies: a package depending on the services would take part in
// building their production bundles (scripts/bundle-service.sh).
const SERVICE_ROOTS = {
  'forge-aggregator': fileURLToPath(new URL('../../../services/forge-aggregator/', import.meta.url)),
  'items-list': fileURLToPath(new URL('../../../services/items-list/', import.meta.url)),
} as const

export type ServiceName = keyof typeof SERVICE_ROOTS

/** One replica of a service, run from its sources as `pnpm start` runs it, on a port of its own. */
export interface Replica {
  service: ServiceName
  port: number
  process: RunningProcess
}

/**
 * Starts a replica of `service` on `port` (a free one unless given: a restarted replica takes its
 * predecessor's, as the balancer knows it by its address) and resolves once it listens. Its log
 * is read by the test: it must say when the replica listens. `root`: the service's sources in
 * another checkout (an earlier version), instead of this one's.
 */
export async function startReplica(service: ServiceName, env: Record<string, string>, port?: number, root = SERVICE_ROOTS[service]): Promise<Replica> {
  const chosen = port ?? (await findFreePort())
  const replica = runServiceSource(root, { ...env, HOST: '127.0.0.1', PORT: String(chosen) })
  await replica.waitFor(LISTENING)
  return { service, port: chosen, process: replica }
}

/**
 * The aggregator's benchmark upstream (services/forge-aggregator/bench/fake-upstream.ts) on a
 * free port: every login is an account, answered after a few milliseconds.
 */
export async function startFakeUpstream(): Promise<{ url: string; process: RunningProcess }> {
  const port = await findFreePort()
  const upstream = runServiceSource(SERVICE_ROOTS['forge-aggregator'], { PORT: String(port) }, 'bench/fake-upstream.ts')
  // It logs nothing: it is up once it accepts connections (within 30 s on a busy machine; if it
  // never does, every request for a user fails, and the test with them).
  await eventually(() => isListening(port), 600)
  return { url: `http://127.0.0.1:${port}`, process: upstream }
}

/** Stops a process with `signal` and resolves with its exit code. */
export async function stop(process: RunningProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (process.child.exitCode === null && process.child.signalCode === null) process.child.kill(signal)
  return process.exited
}
