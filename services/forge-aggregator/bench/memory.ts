/**
 * pnpm --dir services/forge-aggregator bench:memory [--container-mb=N] [--redis] [--dist] [--rounds=N] [MB…]:
 * the resident memory one replica reaches for each FORGE_CACHE_MAX_MB given (default 8 and 64),
 * and the line through the peaks, peak ≈ base + k × FORGE_CACHE_MAX_MB, that a container's memory
 * request and limit are set from (docs/design.md, "Memory"; deploy/kubernetes checks its limits
 * against it).
 *
 * Per setting, the service (its own process) is asked for `--rounds` rounds of LOGINS_PER_ROUND
 * logins it has never seen, CONCURRENCY at a time, against the fake upstream (about 150 KB of
 * upstream bodies per users answer, all held for revalidation); its RSS is read from /proc at
 * start (idle), at its highest (VmHWM) and after a pause with no load (settled).
 *   --container-mb=N  V8's heap sized as Node sizes it in a container limited to N MB: half the limit.
 *   --redis           REDIS_URL set, as the Kubernetes base runs it, on a private Redis bounded and
 *                     evicting as the cache's own is.
 *   --dist            the production build (`node dist/server.js`, after `pnpm build`), as the image runs it.
 * Figures are reported, not enforced; the exit code is 1 only when a server fails or an answer is not 200.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { Agent, request } from 'undici'
import { startPrivateRedis } from '@repo/test-support'
import { startServer, stopEveryServer, type Server } from './servers.ts'

const LOGINS_PER_ROUND = 2_000
const CONCURRENCY = 32
/** A round that has not asked all its logins by then stops there: the bench is bounded in time. */
const ROUND_DEADLINE_MS = 60_000
/** The pause before the settled sample: long enough for V8 to collect. */
const SETTLE_MS = 3_000

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: { 'container-mb': { type: 'string' }, redis: { type: 'boolean' }, dist: { type: 'boolean' }, rounds: { type: 'string', default: '3' } },
})
const settings = positionals.length > 0 ? positionals.map(Number) : [8, 64]
const containerMb = options['container-mb'] === undefined ? undefined : Number(options['container-mb'])
const rounds = Number(options.rounds)
if (settings.some((mb) => !Number.isInteger(mb) || mb < 1 || mb > 4_096) || (containerMb !== undefined && !(containerMb >= 64)) || !(rounds >= 1 && rounds <= 20)) {
  console.error('usage: bench:memory [--container-mb=N (>= 64)] [--redis] [--dist] [--rounds=1…20] [FORGE_CACHE_MAX_MB (1–4096) …]')
  process.exit(2)
}

const dispatcher = new Agent({ connections: CONCURRENCY })
const rows: Record<string, { 'idle RSS MB': number; 'peak RSS MB': number; 'settled RSS MB': number; 'logins asked': number }> = {}
const peaks: [number, number][] = []
const problems: string[] = []
console.log(`forge-aggregator memory: ${process.argv.slice(2).join(' ') || 'defaults'} (load average ${loadavg()[0]!.toFixed(1)})`)
try {
  const upstream = await startServer('fake upstream', 'bench/fake-upstream.ts', {}, '/users/ready')
  for (const mb of settings) {
    // Bounded and evicting as the cache's own Redis is: thousands of logins would otherwise leave gigabytes of held bodies in it.
    const redis = options.redis ? await startPrivateRedis({ durable: false, args: ['--maxmemory', '256mb', '--maxmemory-policy', 'allkeys-lru'] }) : undefined
    const env = {
      FORGE_API_URL: upstream.url,
      FORGE_CACHE_MAX_MB: String(mb),
      ...(redis ? { REDIS_URL: `redis://127.0.0.1:${redis.port}` } : {}),
      ...(containerMb ? { NODE_OPTIONS: `--max-heap-size=${Math.floor(containerMb / 2)}` } : {}),
    }
    try {
      const service = await startServer('service', options.dist ? 'dist/server.js' : 'src/server.ts', env, '/ready')
      const idle = rssMb(service, 'VmRSS')
      let asked = 0
      for (let round = 0; round < rounds; round++) asked += await askAll(service, `mem-${mb}-${round}`)
      await sleep(SETTLE_MS)
      const peak = rssMb(service, 'VmHWM')
      rows[`FORGE_CACHE_MAX_MB=${mb}`] = { 'idle RSS MB': idle, 'peak RSS MB': peak, 'settled RSS MB': rssMb(service, 'VmRSS'), 'logins asked': asked }
      peaks.push([mb, peak])
      service.process.child.kill('SIGKILL')
    } finally {
      await redis?.dispose()
    }
  }
  console.table(rows)
  if (peaks.length >= 2) {
    const { base, slope } = fitLine(peaks)
    console.log(`peak RSS ≈ ${base.toFixed(0)} MB + ${slope.toFixed(2)} × FORGE_CACHE_MAX_MB (least squares over ${peaks.length} settings)`)
  }
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  stopEveryServer()
  await dispatcher.close()
}
if (problems.length > 0) {
  console.error(`\nFUNCTIONAL PROBLEMS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** Asks for LOGINS_PER_ROUND new logins' users answers, CONCURRENCY at a time, until done or the deadline: how many were asked. */
async function askAll(service: Server, prefix: string): Promise<number> {
  const deadline = performance.now() + ROUND_DEADLINE_MS
  let next = 0
  const worker = async () => {
    while (next < LOGINS_PER_ROUND && performance.now() < deadline) {
      const response = await request(`${service.url}/api/forge/users?user_name=${prefix}-${next++}`, { dispatcher })
      await response.body.dump()
      if (response.statusCode !== 200) problems.push(`a users answer was ${response.statusCode}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return next
}

/** A field of the process's /proc status (VmRSS now, VmHWM its highest), in MB. */
function rssMb(service: Server, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${service.process.child.pid}/status`, 'utf8')
  return Math.round(Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1]) / 1024)
}

/** Least-squares line through `points` ([x, y]): y ≈ base + slope × x. */
function fitLine(points: [number, number][]): { base: number; slope: number } {
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / points.length
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / points.length
  const covariance = points.reduce((sum, [x, y]) => sum + (x - meanX) * (y - meanY), 0)
  const variance = points.reduce((sum, [x]) => sum + (x - meanX) ** 2, 0)
  const slope = variance === 0 ? 0 : covariance / variance
  return { base: meanY - slope * meanX, slope }
}
