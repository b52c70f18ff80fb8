/**
 * pnpm --dir services/forge-aggregator bench:memory [options] [MB…]: how much memory one replica
 * takes for a given FORGE_CACHE_MAX_MB (default: 8 and 64, the default setting), so that a
 * container's memory request and limit come from a measurement rather than a guess (issue 17:
 * with 8 MB and 3 × 2,000 new logins, RSS went from 159 to 443 MB, far above the setting).
 *
 * For each setting it starts the service as `pnpm start` runs it (its own process, in-process
 * caches, info logging to /dev/null) against the bench's fake upstream (fake-upstream.ts: 30
 * repositories and 20 followers per login, about 150 KB of upstream bodies per users answer, all
 * held for revalidation), then asks it for `--rounds` × LOGINS_PER_ROUND logins it has never
 * seen, CONCURRENCY at a time. Every request goes to 127.0.0.1 only; each round stops at its
 * deadline even when not all its logins were asked. After each round, and once more after a pause
 * with no load, it reads the process's resident memory from /proc/<pid>/status (VmRSS, and VmHWM,
 * the highest it ever was) and the V8 heap from the service's own /metrics
 * (nodejs_heap_size_used_bytes, nodejs_heap_size_total_bytes, nodejs_external_memory_bytes).
 *
 * Options, to measure what a deployment runs:
 *   --container-mb=N  V8's heap sized as Node sizes it in a container limited to N MB. Node reads
 *                     the cgroup's limit and gives V8 about half of it, young generation included;
 *                     on a machine without a limit it sizes the heap from the machine's memory, and
 *                     V8 then lets its young generation grow to 64 MB semi-spaces under this load.
 *   --redis           REDIS_URL set, as the Kubernetes base and compose run it: a private
 *                     redis-server per setting, without persistence, bounded as the cache's Redis is.
 *   --dist            the production build (`node dist/server.js`, after `pnpm build`), as the
 *                     image runs it, instead of the sources (whose type stripping costs ~20 MB).
 *
 * It then fits peak RSS = base + k × FORGE_CACHE_MAX_MB over the settings measured. Figures are
 * reported, not enforced; the exit code is 1 only when something is functionally wrong (a server
 * that does not start or dies, an answer that is not 200). Memory figures move much less than
 * speed with what else runs on the machine, but the garbage collector's timing does: compare
 * peaks over several settings, not single samples.
 */
import { existsSync, readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { startPrivateRedis } from '@repo/test-support'
import { Agent, request } from 'undici'
import { killEveryServer, startServer, stop, type Server } from './servers.ts'

const DEFAULT_SETTINGS_MB = [8, 64]
const ROUNDS = 3
const LOGINS_PER_ROUND = 2_000
const CONCURRENCY = 32
/** A round that has not asked all its logins by then stops there: the bench is bounded in time. */
const ROUND_DEADLINE_MS = 60_000
/** The pause after the last round, before the settled sample: long enough for V8 to collect. */
const SETTLE_MS = 3_000
const MIB = 1024 * 1024

interface Sample {
  label: string
  logins: number
  seconds: number
  rssMb: number
  peakRssMb: number
  heapUsedMb: number
  heapTotalMb: number
  externalMb: number
}

interface SettingResult {
  cacheMb: number
  samples: Sample[]
  peakRssMb: number
  settledRssMb: number
}

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    /** Run the production build (`node dist/server.js`, after `pnpm build`) rather than the sources. */
    dist: { type: 'boolean', default: false },
    /** Size V8's heap as Node does in a container with this memory limit (MB). */
    'container-mb': { type: 'string' },
    /** With REDIS_URL set, as the Kubernetes base runs it. */
    redis: { type: 'boolean', default: false },
    /** Rounds of new logins per setting. */
    rounds: { type: 'string', default: String(ROUNDS) },
  },
})
const settingsMb = positionals.length > 0 ? positionals.map(Number) : DEFAULT_SETTINGS_MB
const containerMb = options['container-mb'] === undefined ? undefined : Number(options['container-mb'])
const rounds = Number(options.rounds)
if (
  settingsMb.some((value) => !Number.isInteger(value) || value < 1 || value > 4_096) ||
  (containerMb !== undefined && !(containerMb >= 64)) ||
  !(Number.isInteger(rounds) && rounds >= 1 && rounds <= 20)
) {
  console.error('usage: bench:memory [--dist] [--redis] [--container-mb=N] [--rounds=1…20] [FORGE_CACHE_MAX_MB …] (integers 1–4096; default 8 64)')
  process.exit(2)
}

const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: CONCURRENCY })
const problems: string[] = []
const results: SettingResult[] = []


if (options.dist && !existsSync(new URL('../dist/server.js', import.meta.url))) {
  console.error('--dist runs the production build: build it first (pnpm build at the root)')
  process.exit(2)
}

const started = performance.now()
const loadBefore = loadavg()
try {
  console.log(
    `forge-aggregator memory: FORGE_CACHE_MAX_MB ${settingsMb.join(', ')}; the ${options.dist ? 'production build (dist/server.js)' : 'sources, as pnpm start runs them'}` +
      `${options.redis ? ', REDIS_URL set (a private redis-server)' : ', no REDIS_URL'}` +
      `${containerMb === undefined ? '' : `, V8's heap sized for a ${containerMb} MB container (--max-heap-size=${containerHeapMb(containerMb)})`}; ` +
      `per setting ${rounds} rounds of ${LOGINS_PER_ROUND} new logins, ${CONCURRENCY} at a time, against the fake upstream ` +
      `(load average ${loadBefore.map((value) => value.toFixed(1)).join(' ')})\n`,
  )
  const fake = await startServer('fake upstream', 'bench/fake-upstream.ts', {}, '/__calls')
  try {
    for (const cacheMb of settingsMb) results.push(await measure(cacheMb, fake.url))
  } finally {
    await stop(fake)
  }
  report()
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  killEveryServer()
  await dispatcher.close()
}

if (problems.length > 0) {
  console.error(`\nFUNCTIONAL PROBLEMS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** One setting: a fresh service, idle, then filled round by round, then left alone for a moment. */
async function measure(cacheMb: number, upstream: string): Promise<SettingResult> {
  // Bounded and evicting as the cache's own Redis is (DESIGN §11): a few thousand logins would
  // otherwise leave gigabytes of held bodies in it.
  const redis = options.redis ? await startPrivateRedis({ durable: false, args: ['--maxmemory', '256mb', '--maxmemory-policy', 'allkeys-lru'] }) : undefined
  const env = {
    HOST: '127.0.0.1',
    FORGE_API_URL: upstream,
    FORGE_CACHE_MAX_MB: String(cacheMb),
    ...(redis === undefined ? {} : { REDIS_URL: `redis://127.0.0.1:${redis.port}` }),
    ...(containerMb === undefined ? {} : { NODE_OPTIONS: `--max-heap-size=${containerHeapMb(containerMb)}` }),
  }
  try {
    const service = await startServer('service', options.dist ? 'dist/server.js' : 'src/server.ts', env, '/ready')
    try {
      return await fill(service, cacheMb)
    } finally {
      await stop(service)
    }
  } finally {
    await redis?.dispose()
  }
}

/** Samples `service` idle, after each round of new logins, and once settled; prints them. */
async function fill(service: Server, cacheMb: number): Promise<SettingResult> {
  const samples = [await sample(service, 'idle, after start', 0, 0)]
  let asked = 0
  for (let round = 1; round <= rounds; round++) {
    const roundStarted = performance.now()
    const logins = Array.from({ length: LOGINS_PER_ROUND }, (_, index) => `mem-${cacheMb}-${round}-${index}`)
    asked += await askAll(service.url, logins, roundStarted + ROUND_DEADLINE_MS)
    samples.push(await sample(service, `after round ${round}`, asked, (performance.now() - roundStarted) / 1000))
  }
  await sleep(SETTLE_MS)
  samples.push(await sample(service, `settled, ${SETTLE_MS / 1000} s idle`, asked, SETTLE_MS / 1000))

  console.log(`FORGE_CACHE_MAX_MB=${cacheMb}`)
  console.table(
    Object.fromEntries(
      samples.map(({ label, logins, seconds, rssMb, peakRssMb, heapUsedMb, heapTotalMb, externalMb }) => [
        label,
        {
          'logins so far': logins,
          seconds: Number(seconds.toFixed(1)),
          'RSS MB': rssMb,
          'peak RSS MB': peakRssMb,
          'heap used MB': heapUsedMb,
          'heap total MB': heapTotalMb,
          'external MB': externalMb,
        },
      ]),
    ),
  )
  console.log('')
  const last = samples.at(-1)!
  return { cacheMb, samples, peakRssMb: last.peakRssMb, settledRssMb: last.rssMb }
}

/** Asks for every login's users answer, `CONCURRENCY` at a time, until done or `deadline`: how many were asked. */
async function askAll(serviceUrl: string, logins: string[], deadline: number): Promise<number> {
  let next = 0
  const worker = async () => {
    while (next < logins.length && performance.now() < deadline) {
      const login = logins[next++]!
      const response = await request(`${serviceUrl}/api/forge/users?user_name=${login}`, { dispatcher })
      await response.body.dump()
      expect(response.statusCode === 200, `the users answer for ${login} was ${response.statusCode}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  if (next < logins.length) console.log(`   (a round stopped at its ${ROUND_DEADLINE_MS / 1000} s deadline after ${next} of ${logins.length} logins)`)
  return next
}

/** The process's resident memory (from /proc) and its V8 heap (from its /metrics), in MB. */
async function sample(server: Server, label: string, logins: number, seconds: number): Promise<Sample> {
  const { child } = server.process
  if (child.exitCode !== null || child.signalCode !== null) {
    throw new Error(`the service exited (${child.exitCode ?? child.signalCode}) ${label}:\n${server.process.output().slice(-2_000)}`)
  }
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
  const kilobytes = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1])
  const page = await (await request(`${server.url}/metrics`, { dispatcher })).body.text()
  const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(page)?.[1])
  return {
    label,
    logins,
    seconds,
    rssMb: Math.round(kilobytes('VmRSS') / 1024),
    peakRssMb: Math.round(kilobytes('VmHWM') / 1024),
    heapUsedMb: Math.round(metric('nodejs_heap_size_used_bytes') / MIB),
    heapTotalMb: Math.round(metric('nodejs_heap_size_total_bytes') / MIB),
    externalMb: Math.round(metric('nodejs_external_memory_bytes') / MIB),
  }
}

/** The summary: peak and settled RSS per setting, and the line through the peaks. */
function report(): void {
  console.log('Summary: resident memory against FORGE_CACHE_MAX_MB')
  console.table(
    Object.fromEntries(
      results.map(({ cacheMb, peakRssMb, settledRssMb, samples }) => [
        `FORGE_CACHE_MAX_MB=${cacheMb}`,
        {
          'idle RSS MB': samples[0]!.rssMb,
          'peak RSS MB': peakRssMb,
          'settled RSS MB': settledRssMb,
          'peak RSS / setting': Number((peakRssMb / cacheMb).toFixed(1)),
          'peak heap used MB': Math.max(...samples.map((entry) => entry.heapUsedMb)),
        },
      ]),
    ),
  )
  if (containerMb !== undefined) {
    const over = results.filter(({ peakRssMb }) => peakRssMb >= containerMb)
    console.log(
      over.length === 0
        ? `every peak stayed below the ${containerMb} MB container limit`
        : `OVER THE LIMIT: ${over.map(({ cacheMb, peakRssMb }) => `${cacheMb} MB → ${peakRssMb} MB`).join(', ')} (${containerMb} MB container)`,
    )
  }
  if (results.length >= 2) {
    const { base, slope } = fitLine(results.map(({ cacheMb, peakRssMb }) => [cacheMb, peakRssMb]))
    console.log(`peak RSS ≈ ${base.toFixed(0)} MB + ${slope.toFixed(2)} × FORGE_CACHE_MAX_MB (least squares over ${results.length} settings)`)
  }
  const loadAfter = loadavg()
  console.log(
    `${((performance.now() - started) / 1000).toFixed(0)} s in all; load average before ${loadBefore[0]!.toFixed(1)}, after ${loadAfter[0]!.toFixed(1)} ` +
      '(2 shared cores: timings move with the neighbours, memory much less)',
  )
}

/**
 * The heap Node gives V8 in a container limited to `limitMb`: Node sizes it from the cgroup's
 * limit (uv_get_constrained_memory), and V8 takes half of that below 8 GB (without pointer
 * compression, as Node is built). `--max-heap-size` sets the same heap where there is no such
 * limit, split into young and old generations as V8 splits it.
 */
function containerHeapMb(limitMb: number): number {
  return Math.floor(limitMb / 2)
}

/** Least-squares line through `points` ([x, y]): y ≈ base + slope × x. */
function fitLine(points: [number, number][]): { base: number; slope: number } {
  const n = points.length
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n
  const covariance = points.reduce((sum, [x, y]) => sum + (x - meanX) * (y - meanY), 0)
  const variance = points.reduce((sum, [x]) => sum + (x - meanX) ** 2, 0)
  const slope = variance === 0 ? 0 : covariance / variance
  return { base: meanY - slope * meanX, slope }
}


function expect(condition: boolean, problem: string): void {
  if (!condition) problems.push(problem)
}
