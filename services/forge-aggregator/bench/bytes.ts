/**
 * pnpm --dir services/forge-aggregator bench:bytes [--accounts=40] [--cold=200] [--cache-mb=2] [--capacity-accounts=150] [--cpu-prof=DIR]:
 * what one cached account costs (docs/benchmarks.md, "What a cached account costs"), against the
 * fake upstream (bench/fake-upstream.ts: 30 public repositories and 20 followers an account).
 *
 *   Redis bytes      the service with REDIS_URL (a private redis-server keeping nothing on disk)
 *                    is asked once for each of `--accounts` accounts it has never seen, one at a
 *                    time; then `MEMORY USAGE` of every key in that Redis, summed by kind and
 *                    divided by the accounts.
 *   revalidation     past the TTL, each of those accounts is asked again: the upstream calls it
 *                    cost, by answer status, from the service's forge_upstream_requests_total
 *                    (3 conditional calls answered 304 and the 2 searches an account, when every
 *                    held entry was found and read).
 *   cold CPU         the service's CPU time (user + system, every thread, from /proc) per cold
 *                    users answer, over `--cold` more accounts asked one at a time, after as many
 *                    to warm up. With `--cpu-prof=DIR`, that service writes a V8 CPU profile of
 *                    its whole run into DIR (where its time went: node --cpu-prof).
 *   in-process       the service without Redis and FORGE_CACHE_MAX_MB=`--cache-mb` is asked for
 *                    `--capacity-accounts` accounts, then, past the TTL, for each again, newest
 *                    first: the accounts whose answer was still held (revalidated rather than
 *                    missed), and those whose three resources were still held (all three 304).
 *
 * Figures are reported, not enforced; the exit code is 1 only when a server fails or an answer is
 * not 200.
 */
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { createClient } from 'redis'
import { Agent, request } from 'undici'
import { startPrivateRedis, type PrivateRedis } from '@repo/test-support'
import { startServer, stopEveryServer, type Server } from './servers.ts'

/** Short, so that the revalidations need not wait long; long enough for most answers to be asked fresh. */
const TTL_SECONDS = 2
/** The kinds of keys an account leaves, by what follows the namespace; anything else is the deployment's own (budget, locks, rate limits). */
const KINDS = [
  ['held repository pages', /^held:\/users\/[^/?]+\/repos\?/],
  ['held followers', /^held:\/users\/[^/?]+\/followers\?/],
  ['held profile', /^held:\/users\/[^/?]+$/],
  ['the answer', /^answer:users\//],
] as const

const { values: options } = parseArgs({
  options: {
    accounts: { type: 'string', default: '40' },
    cold: { type: 'string', default: '200' },
    'cache-mb': { type: 'string', default: '2' },
    'capacity-accounts': { type: 'string', default: '150' },
    'cpu-prof': { type: 'string' },
  },
})
const accounts = Number(options.accounts)
const coldAccounts = Number(options.cold)
const cacheMb = Number(options['cache-mb'])
const capacityAccounts = Number(options['capacity-accounts'])
if (![accounts, coldAccounts, cacheMb, capacityAccounts].every((value) => Number.isInteger(value) && value >= 1)) {
  console.error('usage: bench:bytes [--accounts=N] [--cold=N] [--cache-mb=N] [--capacity-accounts=N] (each a whole number >= 1)')
  process.exit(2)
}

const dispatcher = new Agent({ keepAliveTimeout: 30_000 })
const problems: string[] = []
let redis: PrivateRedis | undefined
console.log(`forge-aggregator: what a cached account costs (load average ${loadavg()[0]!.toFixed(1)})\n`)
try {
  const upstream = await startServer('fake upstream', 'bench/fake-upstream.ts', {}, '/users/ready')
  redis = await startPrivateRedis({ durable: false })
  const shared = await startServer(
    'service',
    'src/server.ts',
    {
      FORGE_API_URL: upstream.url,
      FORGE_CACHE_TTL_SECONDS: String(TTL_SECONDS),
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      ...(options['cpu-prof'] ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${options['cpu-prof']}` } : {}),
    },
    '/ready',
  )
  const logins = Array.from({ length: accounts }, (_, index) => `bytes-${index}`)
  for (const login of logins) await askUsers(shared, login)
  await reportRedisBytes(redis.port, accounts)

  await sleep(TTL_SECONDS * 1000)
  const before = await upstreamCalls(shared)
  for (const login of logins) await askUsers(shared, login)
  reportCalls(`Revalidation past the TTL, upstream calls per account (${accounts} accounts)`, before, await upstreamCalls(shared), accounts)

  for (let index = 0; index < coldAccounts; index++) await askUsers(shared, `warm-${index}`)
  const cpuBefore = cpuMicros(shared)
  for (let index = 0; index < coldAccounts; index++) await askUsers(shared, `cold-${index}`)
  console.log(`Cold users answers: ${((cpuMicros(shared) - cpuBefore) / coldAccounts / 1000).toFixed(2)} ms of the service's CPU each (${coldAccounts} asked one at a time, after ${coldAccounts} to warm up)\n`)
  // A graceful stop: the profile is written on exit.
  shared.process.child.kill('SIGTERM')
  await shared.process.exited

  const alone = await startServer('service', 'src/server.ts', { FORGE_API_URL: upstream.url, FORGE_CACHE_TTL_SECONDS: String(TTL_SECONDS), FORGE_CACHE_MAX_MB: String(cacheMb) }, '/ready')
  await reportCapacity(alone)
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  stopEveryServer()
  await redis?.dispose()
  await dispatcher.close()
}
if (problems.length > 0) {
  console.error(`\nFUNCTIONAL PROBLEMS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** The users answer for `login`: its Cache-Status. */
async function askUsers(service: Server, login: string): Promise<string> {
  const response = await request(`${service.url}/api/forge/users?user_name=${login}`, { dispatcher })
  await response.body.dump()
  if (response.statusCode !== 200 || response.headers['x-forge-partial'] !== undefined) problems.push(`the users answer for ${login} was ${response.statusCode}, partial: ${String(response.headers['x-forge-partial'])}`)
  return String(response.headers['cache-status'])
}

/** `MEMORY USAGE` of every key of the Redis at `port`, by kind, per account. */
async function reportRedisBytes(port: number, perAccounts: number): Promise<void> {
  const client = createClient({ url: `redis://127.0.0.1:${port}` })
  await client.connect()
  const totals = new Map<string, { keys: number; bytes: number }>()
  try {
    for await (const keys of client.scanIterator({ COUNT: 1000 })) {
      for (const key of keys) {
        // forge:<format>:<hash>:<what>
        const what = key.split(':').slice(3).join(':')
        const kind = KINDS.find(([, pattern]) => pattern.test(what))?.[0] ?? 'other (budget, locks, rate limits: not per account)'
        const total = totals.get(kind) ?? { keys: 0, bytes: 0 }
        total.keys++
        total.bytes += (await client.memoryUsage(key, { SAMPLES: 0 })) ?? 0
        totals.set(kind, total)
      }
    }
  } finally {
    await client.close()
  }
  const rows: Record<string, { 'keys per account': number; 'bytes per account': number }> = {}
  let all = 0
  for (const [kind] of KINDS) {
    const { keys, bytes } = totals.get(kind) ?? { keys: 0, bytes: 0 }
    rows[kind] = { 'keys per account': keys / perAccounts, 'bytes per account': Math.round(bytes / perAccounts) }
    all += bytes
  }
  rows.all = { 'keys per account': [...KINDS].reduce((sum, [kind]) => sum + (totals.get(kind)?.keys ?? 0), 0) / perAccounts, 'bytes per account': Math.round(all / perAccounts) }
  for (const [kind, { keys, bytes }] of totals) if (!KINDS.some(([name]) => name === kind)) console.log(`(${kind}: ${keys} keys, ${bytes} bytes in all)`)
  console.log(`Redis bytes (MEMORY USAGE), ${perAccounts} accounts of 30 public repositories and 20 followers, each asked once`)
  console.table(rows)
  console.log('')
}

/** forge_upstream_requests_total of `service`, by `<resource> <status>`. */
async function upstreamCalls(service: Server): Promise<Map<string, number>> {
  const response = await request(`${service.url}/metrics`, { dispatcher })
  const page = await response.body.text()
  const calls = new Map<string, number>()
  for (const [, resource, status, count] of page.matchAll(/^forge_upstream_requests_total\{resource="([^"]+)",status="([^"]+)"\} (\d+)$/gm)) {
    calls.set(`${resource} ${status}`, Number(count))
  }
  return calls
}

/** The calls made between two readings of `upstreamCalls`. */
function callsBetween(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  return new Map([...after].map(([name, count]) => [name, count - (before.get(name) ?? 0)] as const).filter(([, count]) => count > 0))
}

function reportCalls(title: string, before: Map<string, number>, after: Map<string, number>, perAccounts: number): void {
  console.log(title)
  console.table(Object.fromEntries([...callsBetween(before, after)].map(([name, count]) => [name, { 'calls per account': count / perAccounts }])))
  console.log('')
}

/**
 * Asks for `capacityAccounts` accounts, then, past the TTL, for each again, newest first: asked in
 * that order, a revalidation that finds its entries writes entries of the same size and evicts
 * nothing, so the count of those found is what the cache held.
 */
async function reportCapacity(service: Server): Promise<void> {
  const logins = Array.from({ length: capacityAccounts }, (_, index) => `capacity-${index}`)
  for (const login of logins) await askUsers(service, login)
  await sleep(TTL_SECONDS * 1000)
  let answersHeld = 0
  let resourcesHeld = 0
  for (const login of logins.toReversed()) {
    const before = await upstreamCalls(service)
    const status = await askUsers(service, login)
    if (/fwd=stale/.test(status)) answersHeld++
    if (callsBetween(before, await upstreamCalls(service)).get('core 304') === 3) resourcesHeld++
  }
  console.log(`In-process caches, FORGE_CACHE_MAX_MB=${cacheMb}, no Redis: of ${capacityAccounts} accounts asked, still held past the TTL`)
  console.table({
    'answers held': { accounts: answersHeld, 'accounts per MB': round(answersHeld / cacheMb) },
    'all three resources held (3 × 304)': { accounts: resourcesHeld, 'accounts per MB': round(resourcesHeld / cacheMb) },
  })
  if (answersHeld === capacityAccounts || resourcesHeld === capacityAccounts) console.log('  every account was held: ask for more (--capacity-accounts) to find the bound')
}

/** CPU time (user + system, every thread) the server's process has used, in µs. */
function cpuMicros(server: Server): number {
  // Fields 14 and 15 (utime, stime) in clock ticks of 10 ms (USER_HZ is 100 on Linux); the command name, field 2, is in parentheses.
  const fields = readFileSync(`/proc/${server.process.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

function round(value: number): number {
  return Math.round(value * 10) / 10
}
