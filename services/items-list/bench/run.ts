/**
 * pnpm bench: items-list's GET and POST /items/ against their ceiling, from one run; target for
 * each, service / ceiling requests/s >= 0.9.
 *
 * Three processes: a private redis-server without persistence (no fsync, so that Redis does not
 * set the pace), the service as `pnpm start` runs it (its defaults: info logging, one access line
 * per request, its stdout to /dev/null) and the ceiling (bench/ceiling.ts: the same Redis command,
 * answer and access line, nothing else). Before any load, the ceiling's answers are checked
 * against the service's: status, body and every header but those that differ per request; the
 * bench stops there if they differ.
 *
 * Each target is measured in slices alternating service and ceiling, after one slice each to warm
 * up; each figure is the median of its side's slices, so that whatever else the machine does
 * weighs on both alike. A server that used at least BUSY of a core set its own pace; below that,
 * the load generator (autocannon, in this process) did when its thread was busy BUSY of the time,
 * else the machine's other work did, and CPU per request is then the steadier comparison.
 * Figures are reported, not enforced: the exit code is 1 only when an answer is wrong.
 */
import type { ChildProcess } from 'node:child_process'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { createClient } from 'redis'
import { cpuMicros, eventually, findFreePort, runServiceSource, startPrivateRedis, type RunningProcess } from '@repo/test-support'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const TARGET = 0.9
const BUSY = 0.9
const ROUNDS = 6
const SLICE_SECONDS = 2
/**
 * 10 connections of 10 requests in flight: one request at a time on each, autocannon spent more
 * CPU per request than the server answering it and, on two cores, held the server to 60 % of one.
 */
const CONNECTIONS = 10
const PIPELINING = 10
/** The list GET answers: 100 names. */
const NAMES = Array.from({ length: 100 }, (_, index) => `bench item number ${index}`)
interface Target {
  method: 'GET' | 'POST'
  path: string
  headers?: Record<string, string>
  body?: string
}

const TARGETS: Target[] = [
  { method: 'GET', path: '/items/' },
  { method: 'POST', path: '/items/', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'benchmarked item' }) },
]
/** What Node writes itself, or what differs per request. */
const PER_REQUEST = new Set(['date', 'connection', 'keep-alive', 'content-length', 'x-request-id'])

interface Server {
  url: string
  process: RunningProcess
}

interface Slice {
  rate: number
  cpuPerRequest: number
  serverBusy: number
  generatorBusy: number
}

const problems: string[] = []
const running: ChildProcess[] = []
const redis = await startPrivateRedis({ durable: false })
const inspector = await createClient({ socket: { host: '127.0.0.1', port: redis.port } }).connect()
try {
  await inspector.rPush('items', NAMES)
  const service = await startServer('src/server.ts', { SHUTDOWN_DELAY_SECONDS: '0', REDIS_HOST: '127.0.0.1' })
  const answers = []
  for (const target of TARGETS) answers.push(await answer(service, target))
  const headers = Object.fromEntries(answers.map(({ headers }, index) => [TARGETS[index]!.method, headers]))
  const ceiling = await startServer('bench/ceiling.ts', { HEADERS: JSON.stringify(headers) })
  // The same list for the ceiling's GET as for the service's: the service's POST lengthened it.
  await inspector.rPop('items')
  for (const [index, target] of TARGETS.entries()) {
    const [own, bare] = [answers[index]!, await answer(ceiling, target)]
    if (JSON.stringify(own) !== JSON.stringify(bare)) throw new Error(`${target.method} ${target.path}: the ceiling answered ${JSON.stringify(bare)}, the service ${JSON.stringify(own)}`)
  }
  await inspector.rPop('items')

  console.log(`items-list benchmark (load average ${load()}): ${CONNECTIONS} connections × ${PIPELINING} pipelined, ${ROUNDS} slices of ${SLICE_SECONDS} s per side in turn, after one each to warm up; medians\n`)
  // GET first: the POSTs lengthen the list it reads.
  for (const target of TARGETS) await compare(service, ceiling, target)
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  for (const server of running) server.kill('SIGKILL')
  inspector.destroy()
  await redis.dispose()
}
console.log(`load average after: ${load()}`)
if (problems.length > 0) {
  console.error(`\nWRONG ANSWERS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** One target on both servers, in alternating slices, and the report. */
async function compare(service: Server, ceiling: Server, target: Target): Promise<void> {
  const sides = [
    { name: 'service', server: service, slices: [] as Slice[] },
    { name: 'ceiling', server: ceiling, slices: [] as Slice[] },
  ]
  for (const side of sides) await slice(side.server, target)
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with the other side, so that neither always follows the other.
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) side.slices.push(await slice(side.server, target))
  }
  const busy = (of: Slice[], key: 'serverBusy' | 'generatorBusy') => median(of.map((slice) => slice[key]))
  const figures = sides.map(({ slices }) => ({
    'req/s': Math.round(median(slices.map((slice) => slice.rate))),
    'CPU µs/request': Math.round(median(slices.map((slice) => slice.cpuPerRequest))),
    'server busy (of a core)': percent(busy(slices, 'serverBusy')),
    'load generator busy': percent(busy(slices, 'generatorBusy')),
    'limited by': busy(slices, 'serverBusy') >= BUSY ? 'server' : busy(slices, 'generatorBusy') >= BUSY ? 'LOAD GENERATOR' : 'machine',
  }))
  console.log(`${target.method} ${target.path}`)
  console.table(Object.fromEntries(sides.map((side, index) => [side.name, figures[index]])))
  const [own, bare] = figures as [(typeof figures)[number], (typeof figures)[number]]
  const ratio = own['req/s'] / bare['req/s']
  console.log(`  service / ceiling, req/s: ${ratio.toFixed(2)}  (target >= ${TARGET}: ${ratio >= TARGET ? 'met' : 'NOT MET'})`)
  console.log(`  the same by cost, CPU per request, ceiling / service: ${(bare['CPU µs/request'] / own['CPU µs/request']).toFixed(2)}`)
  if (figures.some((figure) => figure['limited by'] !== 'server')) console.log('  a server used less than a core: CPU per request is the steadier figure')
  console.log('')
}

/** SLICE_SECONDS of load on `server`: its requests/s, and its CPU per request and share of a core. */
async function slice(server: Server, request: Target): Promise<Slice> {
  const pid = server.process.child.pid
  const before = cpuMicros(pid) ?? Number.NaN
  const generatorBefore = process.cpuUsage()
  const result = await autocannon({ url: server.url, connections: CONNECTIONS, pipelining: PIPELINING, duration: SLICE_SECONDS, requests: [request] })
  const generator = process.cpuUsage(generatorBefore)
  const cpu = (cpuMicros(pid) ?? Number.NaN) - before
  expect(result.non2xx + result.errors === 0, `${result.non2xx + result.errors} of ${result.requests.total} requests to ${server.url} failed or were not 2xx`)
  return { rate: result.requests.total / result.duration, cpuPerRequest: cpu / result.requests.total, serverBusy: cpu / (result.duration * 1e6), generatorBusy: (generator.user + generator.system) / (result.duration * 1e6) }
}

/** Runs `entry` on a free port of 127.0.0.1 against the bench's Redis, its stdout (the access log) to /dev/null; resolves once GET /items/ answers. */
async function startServer(entry: string, env: Record<string, string>): Promise<Server> {
  const port = String(await findFreePort())
  const started = runServiceSource(SERVICE_ROOT, { PORT: port, HOST: '127.0.0.1', REDIS_PORT: String(redis.port), ...env }, entry, { discardStdout: true })
  running.push(started.child)
  const url = `http://127.0.0.1:${port}`
  const answers = async () => (await fetch(`${url}/items/`).catch(() => undefined))?.ok === true
  // 200 polls of 50 ms: a cold start on a busy machine takes a few seconds.
  if ((await eventually(async () => started.child.exitCode !== null || (await answers()), 200)) && started.child.exitCode === null) return { url, process: started }
  throw new Error(`${entry} did not start:\n${started.output()}`)
}

/** The answer to `request`: status, body and the headers that are the same for every request. */
async function answer(server: Server, { method, path, headers = {}, body }: Target) {
  const response = await fetch(`${server.url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) })
  const kept = [...response.headers].filter(([name]) => !PER_REQUEST.has(name)).sort()
  return { status: response.status, headers: Object.fromEntries(kept), body: await response.text() }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

function percent(share: number): string {
  return `${Math.round(share * 100)} %`
}

function load(): string {
  return loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')
}

function expect(condition: boolean, problem: string): void {
  if (!condition) problems.push(problem)
}
