/**
 * pnpm bench: items-list's GET and POST /items/ of a list of 100 names against their ceiling,
 * in two shapes; targets POST >= 0.9 and GET >= 0.95 of the ceiling.
 *
 * - The stack's shape (the one the targets are set in): 50 connections, one request at a time on
 *   each, against a bare Fastify + node-redis route doing one `RPUSH` (POST) or `LRANGE 0 -1`
 *   (GET) of a plain Redis list of 100 names, 1 s slices interleaved, three runs; the figure is
 *   the median of the three runs' ratios.
 * - The project's own shape, for comparison with earlier figures: 10 connections of 10 pipelined
 *   requests, 2 s slices, against the same commands on the service's own layout.
 *
 * Usage: node bench/run.ts [--shape=stack|own|both] [--streams=N] (both by default; with N, that
 * many `GET /items/events` streams stay open on the service throughout, each read to the end by
 * this process, so that the figures include fanning every change out to them). The ceiling sends the same
 * Redis commands on the same layout; the GET is also set, for information, against one
 * `LRANGE 0 -1` of a plain Redis list (the layout of earlier versions, which cannot serve a long
 * list: `pnpm bench:scale`).
 *
 * Three processes: a private redis-server without persistence (no fsync, so that Redis does not
 * set the pace), the service as `pnpm start` runs it (its defaults: info logging, one access line
 * per request, its stdout to /dev/null) and the ceiling (bench/ceiling.ts: the same Redis command,
 * answer and access line, nothing else). Before any load, the ceiling's answers are checked
 * against the service's: status, body and every header but those that differ per request; the
 * bench stops there if they differ.
 *
 * Each target is measured in slices alternating service and ceiling, each figure the median of its
 * side's slices (test-support's `compareInSlices`).
 * Figures are reported, not enforced: the exit code is 1 only when an answer is wrong.
 */
import type { ChildProcess } from 'node:child_process'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createClient } from 'redis'
import { compareInSlices, eventually, findFreePort, reportComparison, runServiceSource, startPrivateRedis, type RunningProcess } from '@repo/test-support'
import { groupSizes } from './group-sizes.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const { values: options } = parseArgs({ options: { shape: { type: 'string', default: 'both' }, streams: { type: 'string', default: '0' } } })
const TARGET = 0.9
const GET_TARGET = 0.95
/** The stack's shape: one request at a time on each of 50 connections, 1 s slices, three runs. */
const STACK = { connections: 50, pipelining: 1, sliceSeconds: 1, rounds: 4, runs: 3 }
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
  /** The ceiling's route, when not `path`. */
  ceilingPath?: string
}

const TARGETS: Target[] = [
  { method: 'GET', path: '/items/' },
  { method: 'POST', path: '/items/', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'benchmarked item' }) },
]
/** The GET and the POST against one LRANGE 0 -1 or RPUSH of a plain list: the stack's ceiling. */
const NAIVE_GET: Target = { method: 'GET', path: '/items/', ceilingPath: '/naive/' }
const NAIVE_POST: Target = { ...TARGETS[1]!, ceilingPath: '/naive/' }
/** What Node writes itself, or what differs per request. */
const PER_REQUEST = new Set(['date', 'connection', 'keep-alive', 'content-length', 'x-request-id'])

interface Server {
  url: string
  process: RunningProcess
}

const problems: string[] = []
let watchers: { stop(): string } | undefined
const running: ChildProcess[] = []
const redis = await startPrivateRedis({ durable: false })
const inspector = await createClient({ socket: { host: '127.0.0.1', port: redis.port } }).connect()
try {
  // As an earlier version wrote it: the service moves it into its layout as it starts.
  await inspector.rPush('items', NAMES)
  await inspector.rPush('naive', NAMES)
  const service = await startServer('src/server.ts', { SHUTDOWN_DELAY_SECONDS: '0', REDIS_HOST: '127.0.0.1' })
  const answers = []
  for (const target of TARGETS) answers.push(await answer(service, target))
  const headers = Object.fromEntries(answers.map(({ headers }, index) => [TARGETS[index]!.method, headers]))
  const ceiling = await startServer('bench/ceiling.ts', { HEADERS: JSON.stringify(headers) })
  // The same list for the ceiling's GET as for the service's: each POST lengthens it.
  const unappend = () =>
    Promise.all(['items', 'naive'].map((path) => fetch(`${path === 'items' ? service.url : ceiling.url}/${path}/${encodeURIComponent('benchmarked item')}`, { method: 'DELETE' })))
  await unappend()
  for (const [index, target] of [...TARGETS, NAIVE_GET, NAIVE_POST].entries()) {
    const [own, bare] = [answers[index % TARGETS.length]!, await answer(ceiling, target, target.ceilingPath)]
    if (JSON.stringify(own) !== JSON.stringify(bare)) throw new Error(`${target.method} ${target.ceilingPath ?? target.path}: the ceiling answered ${JSON.stringify(bare)}, the service ${JSON.stringify(own)}`)
    if (target.method === 'POST') await unappend()
  }

  watchers = await watch(service, Number(options.streams))
  const own = options.shape !== 'stack'
  const stack = options.shape !== 'own'
  const shape = { connections: CONNECTIONS, pipelining: PIPELINING, sliceSeconds: SLICE_SECONDS, rounds: ROUNDS }
  // GETs first: the POSTs lengthen the list they read.
  if (own) {
    console.log(`items-list benchmark, own shape (load average ${load()}): ${CONNECTIONS} connections × ${PIPELINING} pipelined, ${ROUNDS} slices of ${SLICE_SECONDS} s per side in turn, after one each to warm up; medians\n`)
    await compare(service, ceiling, TARGETS[0]!, shape, TARGET)
    await compare(service, ceiling, NAIVE_GET, shape, TARGET, 'for information: GET /items/ against one LRANGE 0 -1 of a plain list')
  }
  const ratios: Record<string, Ratio[]> = { GET: [], POST: [] }
  if (stack) {
    console.log(`items-list benchmark, the stack's shape (load average ${load()}): ${STACK.connections} connections, one request at a time, ${STACK.rounds} slices of ${STACK.sliceSeconds} s per side in turn, after one each to warm up; ${STACK.runs} runs\n`)
    for (let run = 1; run <= STACK.runs; run++) ratios.GET!.push(await compare(service, ceiling, NAIVE_GET, STACK, GET_TARGET, `run ${run}: GET /items/ against LRANGE 0 -1 of a plain list`))
  }
  if (own) await compare(service, ceiling, TARGETS[1]!, shape, TARGET)
  if (stack) {
    for (let run = 1; run <= STACK.runs; run++) ratios.POST!.push(await compare(service, ceiling, NAIVE_POST, STACK, TARGET, `run ${run}: POST /items/ against RPUSH of a plain list`))
    // What the layout's append costs the stack by itself: the bare route running the service's
    // append script, against the same route running RPUSH.
    await compare(ceiling, ceiling, NAIVE_POST, STACK, TARGET, 'for information: the append script alone, the bare route running it (/items/) against RPUSH (/naive/)')
    console.log(`appends per script call, over every POST of this bench: ${await groupSizes(service.url)}\n`)
    console.log(`the stack's shape, service / ceiling req/s, median of ${STACK.runs} runs (load average ${load()}):`)
    for (const [method, target] of [['POST', TARGET], ['GET', GET_TARGET]] as const) {
      const runs = ratios[method]!
      const middle = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
      const [rate, cost] = [middle(runs.map(({ rate }) => rate)), middle(runs.map(({ cost }) => cost))]
      console.log(`  ${method} /items/, req/s: ${runs.map(({ rate }) => rate.toFixed(2)).join(', ')}: median ${rate.toFixed(2)} (target >= ${target}: ${rate >= target ? 'met' : 'NOT MET'})`)
      console.log(`  ${method} /items/, by cost (CPU per request, ceiling / service): ${runs.map(({ cost }) => cost.toFixed(2)).join(', ')}: median ${cost.toFixed(2)}`)
    }
  }
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  if (watchers) console.log(watchers.stop())
  for (const server of running) server.kill('SIGKILL')
  inspector.destroy()
  await redis.dispose()
}
console.log(`load average after: ${load()}`)
if (problems.length > 0) {
  console.error(`\nWRONG ANSWERS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** Service / ceiling: of requests/s, and by cost (ceiling / service, CPU per request). */
interface Ratio {
  rate: number
  cost: number
}

/** One target on both servers, in alternating slices, and the report. */
async function compare(
  service: Server,
  ceiling: Server,
  target: Target,
  shape: { connections: number; pipelining: number; sliceSeconds: number; rounds: number },
  goal: number,
  title = `${target.method} ${target.path}`,
): Promise<Ratio> {
  const request = { method: target.method, path: target.path, headers: target.headers, body: target.body }
  const figures = await compareInSlices(
    { url: service.url, pid: service.process.child.pid },
    { url: ceiling.url, pid: ceiling.process.child.pid, requests: [{ ...request, path: target.ceilingPath ?? target.path }] },
    { requests: [request], ...shape },
    (problem) => problems.push(problem),
  )
  return { rate: reportComparison(title, figures, goal), cost: figures.ceiling.cpuPerRequest / figures.service.cpuPerRequest }
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
async function answer(server: Server, { method, path, headers = {}, body }: Target, at = path) {
  const response = await fetch(`${server.url}${at}`, { method, headers, ...(body === undefined ? {} : { body }) })
  const kept = [...response.headers].filter(([name]) => !PER_REQUEST.has(name)).sort()
  return { status: response.status, headers: Object.fromEntries(kept), body: await response.text() }
}

function load(): string {
  return loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')
}

/**
 * `count` change-feed streams open on `server`, each read to its end; resolves once every one has
 * sent its snapshot. `stop()` closes them and says what they received.
 */
async function watch(server: Server, count: number): Promise<{ stop(): string } | undefined> {
  if (count === 0) return undefined
  const abort = new AbortController()
  let bytes = 0
  let synced = 0
  const ended: string[] = []
  for (let index = 0; index < count; index++) {
    const response = await fetch(`${server.url}/items/events`, { signal: abort.signal })
    if (response.status !== 200) throw new Error(`GET /items/events answered ${response.status}`)
    void (async () => {
      let seenSynced = false
      for await (const chunk of response.body! as AsyncIterable<Uint8Array>) {
        bytes += chunk.byteLength
        if (!seenSynced && Buffer.from(chunk).includes('event: synced')) {
          seenSynced = true
          synced++
        }
      }
      ended.push('ended by the service')
    })().catch(() => {})
  }
  await eventually(async () => synced === count, 200)
  console.log(`${count} streams of GET /items/events open on the service, each read to its end\n`)
  return {
    stop() {
      abort.abort()
      return `the ${count} streams received ${(bytes / 1e6).toFixed(1)} MB in all; ${ended.length} were ended by the service before the bench closed them\n`
    },
  }
}
