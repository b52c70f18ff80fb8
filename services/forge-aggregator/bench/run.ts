/**
 * pnpm bench (docs/benchmarks.md): forge-aggregator's two speed targets, from one run.
 *
 *   cache hits  the service's requests/s answering one fresh answer, as a share of its ceiling's
 *               (bench/ceiling.ts: a bare route sending the same answer and the same access line):
 *               target >= 0.9, in both shapes.
 *   cold p50    the p50 latency of a users answer for a login never seen, in direct upstream round
 *               trips (GET /users/:login straight to the same fake upstream): target <= 1.2.
 *
 * Four processes run side by side: the fake upstream (bench/fake-upstream.ts), a redis-server, the
 * service as compose deploys it (`REDIS_URL` set, webhooks on; a TTL of an hour, so that no hit
 * turns into a revalidation during the run) and the ceiling. The two sides of each ratio are
 * measured in turn, in short slices, round after round, so that whatever else the machine does
 * weighs on both alike: cold answers one at a time, cache hits under load in two shapes, pipelined
 * and one request at a time per connection (test-support's `compareInSlices`, medians of each
 * side's slices).
 * Figures are reported, not enforced: the exit code is 1 only when an answer is wrong (not 200,
 * partial, or not the service's).
 */
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Agent, request } from 'undici'
import { compareInSlices, reportComparison, startPrivateRedis, type PrivateRedis } from '@repo/test-support'
import { startServer, stopEveryServer, type Server } from './servers.ts'

const TARGET = { hits: 0.9, cold: 1.2 }
const ROUNDS = 6
/**
 * Cache hits in two shapes. Pipelined, autocannon spends little per request and the server sets
 * the pace. One request at a time per connection, as browsers and most clients send them, it
 * spends nearly as much CPU per request as the service and may be the limit on two cores: the
 * report then says so, and CPU per request is the figure to read.
 */
const HIT_SHAPES = [
  { connections: 10, pipelining: 10 },
  { connections: 50, pipelining: 1 },
]
/** Any value: with a secret the webhook endpoint and its Redis subscription are on, as deployed. */
const WEBHOOK_SECRET = 'bench-webhook-secret'
const SLICE_SECONDS = 2
const COLD_PER_SLICE = 10
const HIT = '/api/forge/users?user_name=hot-user'

const dispatcher = new Agent({ keepAliveTimeout: 30_000 })
const problems: string[] = []
const loadBefore = loadavg()
let redis: PrivateRedis | undefined
try {
  const upstream = await startServer('fake upstream', 'bench/fake-upstream.ts', {}, '/users/ready')
  // A cache: it keeps nothing on disk, as the compose file runs the aggregator's Redis.
  redis = await startPrivateRedis({ durable: false })
  const service = await startServer(
    'service',
    'src/server.ts',
    { FORGE_API_URL: upstream.url, FORGE_CACHE_TTL_SECONDS: '3600', REDIS_URL: `redis://127.0.0.1:${redis.port}`, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET },
    '/ready',
  )
  await get(`${service.url}${HIT}`)
  const answer = await get(`${service.url}${HIT}`)
  expect(answer.status === 200 && /; hit;/.test(String(answer.headers['cache-status'])), `the service's second answer for ${HIT} was no hit`)
  const ceiling = await startServer('ceiling', 'bench/ceiling.ts', { ANSWER: JSON.stringify({ path: HIT, headers: answer.headers, body: answer.body }) }, HIT)
  expect((await get(`${ceiling.url}${HIT}`)).body === answer.body, 'the ceiling does not send the body the service sent')

  console.log(`forge-aggregator benchmark (load average ${loadBefore.map((value) => value.toFixed(1)).join(' ')})\n`)
  await cold(upstream, service)
  for (const shape of HIT_SHAPES) await hits(service, ceiling, answer.body.length, shape)
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  stopEveryServer()
  await redis?.dispose()
  await dispatcher.close()
}
console.log(`load average after: ${loadavg().map((value) => value.toFixed(1)).join(' ')}`)
if (problems.length > 0) {
  console.error(`\nFUNCTIONAL PROBLEMS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** Cold users answers against direct round trips, one request at a time, in alternating slices. */
async function cold(upstream: Server, service: Server): Promise<void> {
  const direct: number[] = []
  const answers: number[] = []
  // The first round warms both up (connections, the JIT) and is not counted.
  for (let pass = 0; pass <= ROUNDS; pass++) {
    const counted = pass > 0
    for (let index = 0; index < COLD_PER_SLICE; index++) {
      const { ms } = await get(`${upstream.url}/users/direct-${pass}-${index}`)
      if (counted) direct.push(ms)
    }
    for (let index = 0; index < COLD_PER_SLICE; index++) {
      const cold = await get(`${service.url}/api/forge/users?user_name=cold-${pass}-${index}`)
      expect(cold.status === 200 && cold.headers['x-forge-partial'] === undefined, `a cold answer was ${cold.status}, partial: ${String(cold.headers['x-forge-partial'])}`)
      if (counted) answers.push(cold.ms)
    }
  }
  const ratio = percentile(answers, 50) / percentile(direct, 50)
  console.log(`Cold users answers: ${ROUNDS} slices of ${COLD_PER_SLICE} never-seen logins, one at a time, each after ${COLD_PER_SLICE} direct round trips`)
  console.table({
    'direct round trip (GET /users/:login)': { 'p50 ms': round(percentile(direct, 50)), 'p99 ms': round(percentile(direct, 99)) },
    'cold users answer (5 upstream calls)': { 'p50 ms': round(percentile(answers, 50)), 'p99 ms': round(percentile(answers, 99)) },
  })
  console.log(`  cold p50 / direct round trip p50: ${ratio.toFixed(2)}  (target <= ${TARGET.cold}: ${ratio <= TARGET.cold ? 'met' : 'NOT MET'})\n`)
}

/** Cache hits on the service and on its ceiling, in alternating slices of load. */
async function hits(service: Server, ceiling: Server, bytes: number, { connections, pipelining }: (typeof HIT_SHAPES)[number]): Promise<void> {
  const figures = await compareInSlices(
    { url: service.url, pid: service.process.child.pid },
    { url: ceiling.url, pid: ceiling.process.child.pid },
    { requests: [{ method: 'GET', path: HIT }], connections, pipelining, sliceSeconds: SLICE_SECONDS, rounds: ROUNDS },
    (problem) => problems.push(problem),
  )
  const shape = pipelining > 1 ? `${connections} connections × ${pipelining} pipelined` : `${connections} connections, one request at a time each`
  const title = `Cache hits: GET ${HIT} (${bytes} bytes), ${shape}, ${ROUNDS} slices of ${SLICE_SECONDS} s per side, in turn, after one to warm up; medians`
  reportComparison(title, figures, TARGET.hits)
}

async function get(url: string) {
  const started = performance.now()
  const response = await request(url, { dispatcher })
  const body = await response.body.text()
  return { status: response.statusCode, headers: response.headers as Record<string, string>, body, ms: performance.now() - started }
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!
}

function expect(condition: boolean, problem: string): void {
  if (!condition) problems.push(problem)
}

function round(value: number): number {
  return Math.round(value * 10) / 10
}
