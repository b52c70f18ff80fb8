/**
 * pnpm bench:alone: a single client's append latency. One connection sends POST /items/, one at a
 * time, and the time to each answer is recorded; printed: p50 and p99 per run, and their medians.
 * A lone client has no company to form a group with (docs/list.md, "Appends in groups"): each of
 * its appends must go to Redis at once, so this figure is the one grouping must not worsen.
 *
 * `--service=<dir>` measures another checkout's items-list (its `services/items-list` folder,
 * dependencies installed) beside this one, each on its own Redis without persistence, in slices
 * that alternate between the two, so that two versions are compared on one machine in one sitting.
 *
 * Usage: node bench/alone.ts [--appends=2000] [--runs=3] [--service=<dir>]
 */
import { Agent, request } from 'node:http'
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { eventually, findFreePort, runServiceSource, startPrivateRedis, type PrivateRedis, type RunningProcess } from '@repo/test-support'

const { values: options } = parseArgs({
  options: { appends: { type: 'string', default: '2000' }, runs: { type: 'string', default: '3' }, service: { type: 'string' } },
})
const BODY = JSON.stringify({ name: 'a lone client’s item' })
/** Appends sent first on each side, unmeasured: the JIT's warm-up is not the append's cost. */
const WARM_UP = 500

interface Side {
  label: string
  url: string
  agent: Agent
  process: RunningProcess
  redis: PrivateRedis
  /** Each run's p50 and p99, in ms. */
  runs: { p50: number; p99: number }[]
}

const roots = [['this checkout', fileURLToPath(new URL('..', import.meta.url))]]
if (options.service !== undefined) roots.push(['--service', resolve(options.service)])
const sides: Side[] = []
try {
  for (const [label, root] of roots) sides.push(await startSide(label!, root!))
  console.log(`items-list, a lone client's appends (load average ${load()}): one connection, one POST at a time, ${options.runs} runs of ${options.appends} per side in turn, after ${WARM_UP} to warm up`)
  for (const side of sides) await appendTimes(side, WARM_UP)
  for (let run = 0; run < Number(options.runs); run++) {
    // Each run starts with the other side, so that neither always follows the other.
    for (const side of run % 2 === 0 ? sides : [...sides].reverse()) {
      const times = (await appendTimes(side, Number(options.appends))).sort((a, b) => a - b)
      side.runs.push({ p50: percentile(times, 0.5), p99: percentile(times, 0.99) })
    }
  }
  for (const side of sides) {
    const runs = side.runs.map(({ p50, p99 }) => `${p50.toFixed(3)}/${p99.toFixed(3)}`).join(', ')
    const p50 = median(side.runs.map(({ p50 }) => p50))
    const p99 = median(side.runs.map(({ p99 }) => p99))
    console.log(`  ${side.label} (${side.url}): p50/p99 ms per run ${runs}: median p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms`)
  }
  console.log(`load average after: ${load()}`)
} finally {
  for (const side of sides) {
    side.process.child.kill('SIGKILL')
    side.agent.destroy()
    await side.redis.dispose()
  }
}

/** The service at `root` as `pnpm start` runs it (its defaults, its access log to /dev/null), on a Redis of its own. */
async function startSide(label: string, root: string): Promise<Side> {
  const redis = await startPrivateRedis({ durable: false })
  const port = await findFreePort()
  const url = `http://127.0.0.1:${port}`
  const started = runServiceSource(root, { PORT: String(port), HOST: '127.0.0.1', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port), SHUTDOWN_DELAY_SECONDS: '0' }, 'src/server.ts', {
    discardStdout: true,
  })
  const ready = async () => (await fetch(`${url}/ready`).catch(() => undefined))?.ok === true
  if (!(await eventually(ready, 200))) throw new Error(`the service at ${root} did not become ready:\n${started.output()}`)
  return { label, url, agent: new Agent({ keepAlive: true, maxSockets: 1 }), process: started, redis, runs: [] }
}

/** `count` appends, one after the other on one kept-alive connection: each one's time to its whole answer, in ms. */
async function appendTimes(side: Side, count: number): Promise<number[]> {
  const times: number[] = []
  for (let index = 0; index < count; index++) {
    const started = performance.now()
    const status = await append(side)
    times.push(performance.now() - started)
    if (status !== 201) throw new Error(`an append to ${side.label} answered ${status}`)
  }
  return times
}

function append(side: Side): Promise<number | undefined> {
  return new Promise((done, fail) => {
    const sent = request(`${side.url}/items/`, { method: 'POST', agent: side.agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) } }, (res) => {
      res.resume()
      res.on('end', () => done(res.statusCode))
    })
    sent.on('error', fail)
    sent.end(BODY)
  })
}

function percentile(sorted: number[], share: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))]!
}

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
}

function load(): string {
  return loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')
}
