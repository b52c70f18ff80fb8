/**
 * pnpm bench:profile: where a request's time goes, on both sides. The service runs under
 * `--cpu-prof` while autocannon sends it POST /items/ (or GET, `--method=GET`) from 50 connections,
 * one request at a time, for `--seconds`; then the ceiling (bench/ceiling.ts) takes the same load on
 * its plain-list route (`RPUSH` or `LRANGE 0 -1`). Printed:
 *
 * - the service's top functions by self time (from the profile, written when it exits);
 * - Redis's own time per command (`INFO commandstats`, reset before each side's load): the append
 *   script (`evalsha`) and the commands it runs, against the ceiling's `RPUSH`.
 *
 * A private redis-server without persistence, as `pnpm bench`. Usage:
 *   node bench/profile.ts [--method=POST|GET] [--seconds=10] [--keep=<dir for the .cpuprofile>]
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readdir, readFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createClient } from 'redis'
import { eventually, findFreePort, loadFor, startPrivateRedis } from '@repo/test-support'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const { values: options } = parseArgs({
  options: { method: { type: 'string', default: 'POST' }, seconds: { type: 'string', default: '10' }, keep: { type: 'string' } },
})
const METHOD = options.method === 'GET' ? 'GET' : 'POST'
const SECONDS = Number(options.seconds)
const NAMES = Array.from({ length: 100 }, (_, index) => `bench item number ${index}`)
const REQUEST = METHOD === 'POST' ? { method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'benchmarked item' }) } : { method: 'GET' as const }

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const redis = await startPrivateRedis({ durable: false })
const inspector = await createClient({ socket: { host: '127.0.0.1', port: redis.port } }).connect()
const profiles = options.keep ?? (await mkdtemp(join(tmpdir(), 'items-profile-')))
const running: ChildProcess[] = []
try {
  await inspector.rPush('items', NAMES)
  await inspector.rPush('naive', NAMES)
  console.log(`items-list profile, ${METHOD} /items/, 50 connections for ${SECONDS} s per side (load average ${load()})\n`)

  const service = await start(join(profiles, 'service'), 'src/server.ts', { SHUTDOWN_DELAY_SECONDS: '0', REDIS_HOST: '127.0.0.1' })
  const served = await measure(service, '/items/')
  const serviceStats = await commandStats()
  await stop(service)
  const ceiling = await start(join(profiles, 'ceiling'), 'bench/ceiling.ts', { HEADERS: JSON.stringify({ GET: {}, POST: {} }) })
  const ceilingServed = await measure(ceiling, '/naive/')
  const ceilingStats = await commandStats()
  await stop(ceiling)

  console.log(`service: ${Math.round(served.rate)} req/s; ceiling: ${Math.round(ceilingServed.rate)} req/s\n`)
  console.log('Redis, µs per call (INFO commandstats), under the service:')
  console.table(serviceStats)
  console.log('Redis, µs per call, under the ceiling:')
  console.table(ceilingStats)

  const [own, bare] = [await selfTimes(join(profiles, 'service')), await selfTimes(join(profiles, 'ceiling'))]
  console.log(`the service's top functions by self time, µs of a profile sample per request, beside the ceiling's (profiles in ${profiles}):`)
  console.table(
    [...own.entries()]
      .filter(([name]) => name !== '(idle)')
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([name, micros]) => ({ function: name.slice(0, 100), service: round(micros / served.requests), ceiling: round((bare.get(name) ?? 0) / ceilingServed.requests) })),
  )
  const busy = (times: Map<string, number>, requests: number) => round([...times].reduce((sum, [name, micros]) => (name === '(idle)' ? sum : sum + micros), 0) / requests)
  console.log(`in all, µs per request not idle: service ${busy(own, served.requests)}, ceiling ${busy(bare, ceilingServed.requests)}`)
} finally {
  for (const child of running) child.kill('SIGKILL')
  inspector.destroy()
  await redis.dispose()
}

interface Started {
  url: string
  child: ChildProcess
}

/** `entry`, under `--cpu-prof` (its profile written to `dir` when it exits); resolves once it answers. */
async function start(dir: string, entry: string, env: Record<string, string>): Promise<Started> {
  const port = String(await findFreePort())
  const child = spawn(process.execPath, ['--conditions=@repo/source', '--cpu-prof', '--cpu-prof-dir', dir, entry], {
    cwd: SERVICE_ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: port, HOST: '127.0.0.1', REDIS_PORT: String(redis.port), ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  running.push(child)
  const url = `http://127.0.0.1:${port}`
  if (await eventually(async () => (await fetch(`${url}/items/`).catch(() => undefined))?.ok === true, 200)) return { url, child }
  throw new Error(`${entry} did not start`)
}

/** Two seconds to warm up, then SECONDS measured, Redis's command statistics reset between; the requests the profile holds. */
async function measure(server: Started, path: string): Promise<{ rate: number; requests: number }> {
  const warm = await loadFor(server.url, [{ ...REQUEST, path }], 50, 2)
  await inspector.configResetStat()
  const rate = await loadFor(server.url, [{ ...REQUEST, path }], 50, SECONDS)
  // The profile holds the warm-up's requests too.
  return { rate, requests: warm * 2 + rate * SECONDS }
}

/** Ends `server` the way a container is ended, so that it writes its profile. */
async function stop(server: Started): Promise<void> {
  const exited = new Promise((resolve) => server.child.once('exit', resolve))
  server.child.kill('SIGTERM')
  await exited
}

/** `INFO commandstats`: calls and µs per call of each command run. */
async function commandStats(): Promise<Record<string, { calls: number; 'µs/call': number }>> {
  const info = await inspector.info('commandstats')
  const stats: Record<string, { calls: number; 'µs/call': number }> = {}
  for (const [, command, calls, perCall] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/gm)) {
    if (command === 'config' || command === 'info') continue
    stats[command!] = { calls: Number(calls), 'µs/call': Number(perCall) }
  }
  return stats
}

/** Self time (µs) per function of the profile in `dir`, by name and place, the warm-up included. */
async function selfTimes(dir: string): Promise<Map<string, number>> {
  const [file] = (await readdir(dir)).filter((name) => name.endsWith('.cpuprofile'))
  if (file === undefined) throw new Error(`no profile in ${dir}`)
  const profile = JSON.parse(await readFile(join(dir, file), 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<string, number>()
  profile.samples.forEach((id, index) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame
    const where = url === '' ? '' : ` ${url.replace(/^.*\/node_modules\//, '').replace(/^.*\/(services|packages)\//, '')}:${lineNumber + 1}`
    const name = `${functionName || '(anonymous)'}${where}`
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[index] ?? 0))
  })
  return self
}

function round(value: number): number {
  return Math.round(value * 100) / 100
}

function load(): string {
  return loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')
}
