import t from 'tap'
import { fileURLToPath } from 'node:url'
import { createClient } from 'redis'
import { composeRedisFlags, LENIENT_REDIS_DEADLINE_MS, LISTENING, nodePath, runProcess, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS } from '@repo/test-support'
import user from '../fixtures/user.json' with { type: 'json' }
import recordedHeaders from '../fixtures/headers.json' with { type: 'json' }
import { buildAggregator } from '../helpers/build.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'

/**
 * The data tier's bar: a flood never evicts an idempotency record. The two Redis servers run
 * with the flags docker-compose.yml gives them (read from the file, not copied) and the real ACL
 * users; only their maxmemory is made smaller, so that a few hundred requests fill each: cold
 * requests to the aggregator fill the cache, appends to items-list fill the durable Redis.
 */
const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url))
const CACHE_MAX_MEMORY = 8 * 2 ** 20
/** About half a megabyte above what an empty Redis with the ACL users takes. */
const DURABLE_MAX_MEMORY = 1.5 * 2 ** 20
const durableFlags = await composeRedisFlags('redis')

const durable = await startRedisWithServiceUsers({ args: [...durableFlags, '--maxmemory', String(DURABLE_MAX_MEMORY)] })
const cache = await startRedisWithServiceUsers({ durable: false, args: [...(await composeRedisFlags('redis-cache')), '--maxmemory', String(CACHE_MAX_MEMORY)] })
t.teardown(async () => {
  await durable.dispose()
  await cache.dispose()
})
const adminOf = (port: number) => createClient({ socket: { host: '127.0.0.1', port }, ...TEST_REDIS_ADMIN }).connect()
const [durableAdmin, cacheAdmin] = await Promise.all([adminOf(durable.port), adminOf(cache.port)])
t.teardown(() => {
  durableAdmin.destroy()
  cacheAdmin.destroy()
})

/** A field of Redis's INFO, as a number (0 when absent); an error count (`errorstat_OOM:count=3`) too. */
async function info(client: typeof cacheAdmin, section: string, field: string): Promise<number> {
  return Number(new RegExp(`^${field}:(?:count=)?(\\d+)`, 'm').exec(await client.info(section))?.[1] ?? 0)
}

/** A name as long as items-list takes, so that each append adds about a kilobyte to the durable Redis. */
const floodName = (index: number) => `flood-${index}-`.padEnd(1024, 'x')

/** A profile whose upstream body is about 200 KB: its bio is a field the aggregator answers with, and holds for revalidation. */
const LARGE_BIO = 'x'.repeat(200 * 1024)

t.test('both Redis servers flooded past their maxmemory: the cache evicts; the durable one refuses appends (503) and evicts nothing, so every name answered 201 and its idempotency record survive and a retry stores nothing twice', async (t) => {
  // items-list as a process of its own (a sibling service: its code is not this package's), as its ACL user.
  const itemsList = runProcess('node', ['--conditions=@repo/source', 'src/server.ts'], {
    cwd: `${REPO_ROOT}services/items-list`,
    env: {
      PATH: nodePath(),
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      REDIS_HOST: '127.0.0.1',
      REDIS_PORT: String(durable.port),
      REDIS_USERNAME: TEST_REDIS_USERS.itemsList.username,
      REDIS_PASSWORD: TEST_REDIS_USERS.itemsList.password,
      RATE_LIMIT_PER_MINUTE: '10000',
    },
  })
  t.teardown(async () => {
    itemsList.child.kill('SIGTERM')
    await itemsList.exited
  })
  const [, port] = await itemsList.waitFor(LISTENING)
  const append = (name: string, key: string) =>
    fetch(`http://127.0.0.1:${port}/items`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify({ name }) })
  // Through items-list itself: how it lays the list out in Redis is its own business.
  const stored = async () => ((await (await fetch(`http://127.0.0.1:${port}/items`)).json()) as { items: string[] }).items
  const names = Array.from({ length: 20 }, (_, index) => `item-${index}`)
  for (const [index, name] of names.entries()) t.equal((await append(name, `key-${index}`)).status, 201)

  // Appends until the durable Redis is full, ten at a time; bounded at twice its maxmemory in
  // names, which a Redis that evicts would take without refusing one.
  const acknowledged = new Map(names.map((name, index) => [name, `key-${index}`]))
  const refusedKeys: string[] = []
  const statusesOfAppends = new Set<number>()
  for (let batch = 0; refusedKeys.length === 0 && batch < (2 * DURABLE_MAX_MEMORY) / 1024; batch += 10) {
    const attempts = Array.from({ length: 10 }, (_, offset) => ({ name: floodName(batch + offset), key: `flood-${batch + offset}` }))
    const answers = await Promise.all(attempts.map(({ name, key }) => append(name, key)))
    for (const [index, answer] of answers.entries()) {
      statusesOfAppends.add(answer.status)
      if (answer.status === 201) acknowledged.set(attempts[index]!.name, attempts[index]!.key)
      else refusedKeys.push(attempts[index]!.key)
    }
  }
  t.same([...statusesOfAppends].toSorted(), [201, 503], 'appends answered 201 until the durable Redis was full, then 503')
  t.ok((await info(durableAdmin, 'errorstats', 'errorstat_OOM')) > 0, 'it refused writes for want of memory')

  // Each user: that profile, no repositories, no followers, no issues.
  const upstream = await startLocalUpstream(t, (request, response) => {
    const { pathname } = new URL(request.url ?? '/', 'http://upstream')
    const login = /^\/users\/([^/]+)$/.exec(pathname)?.[1]
    if (pathname === '/search/issues') return void response.writeHead(200, recordedHeaders.search).end(JSON.stringify({ total_count: 0, incomplete_results: false, items: [] }))
    response.writeHead(200, recordedHeaders.resource).end(JSON.stringify(login ? { ...user, login, public_repos: 0, bio: LARGE_BIO } : []))
  })
  const { app } = await buildAggregator(t, {
    env: {
      FORGE_API_URL: upstream.url,
      REDIS_URL: `redis://127.0.0.1:${cache.port}`,
      REDIS_USERNAME: TEST_REDIS_USERS.forgeAggregator.username,
      REDIS_PASSWORD: TEST_REDIS_USERS.forgeAggregator.password,
      // Eviction is the subject, not time: at load 12-17 a cold request to the upstream in this
      // process answered 500 under the default 10 s deadline.
      FORGE_TIMEOUT_MS: 60_000,
      REDIS_DEADLINE_MS: LENIENT_REDIS_DEADLINE_MS,
    },
  })
  // Twice maxmemory in held profiles alone, ten cold requests at a time.
  const coldRequests = Math.ceil((2 * CACHE_MAX_MEMORY) / LARGE_BIO.length)
  const statuses = new Set<number>()
  const failures = new Set<string>()
  for (let batch = 0; batch < coldRequests; batch += 10) {
    const answers = await Promise.all(Array.from({ length: 10 }, (_, index) => app.inject({ method: 'GET', url: `/api/forge/users?user_name=cold-${batch + index}` })))
    for (const answer of answers) statuses.add(answer.statusCode)
    for (const answer of answers) if (answer.statusCode !== 200) failures.add(answer.body)
  }
  t.same([...statuses], [200], `every cold request answered; the others: ${[...failures].join(' | ')}`)

  t.ok((await info(cacheAdmin, 'stats', 'evicted_keys')) > 0, 'the cache Redis evicted entries to make room (allkeys-lru)')
  t.equal(await info(cacheAdmin, 'errorstats', 'errorstat_OOM'), 0, 'and refused no write')
  t.ok((await info(cacheAdmin, 'memory', 'used_memory')) <= CACHE_MAX_MEMORY * 1.1, 'within its maxmemory')

  t.equal(await info(durableAdmin, 'stats', 'evicted_keys'), 0, 'the durable Redis evicted nothing')
  const records = await durableAdmin.keys('items:idempotency:*')
  t.same(records.toSorted(), [...acknowledged.values()].map((key) => `items:idempotency:${key}`).toSorted(), 'every idempotency record survives, and only those')
  t.same((await stored()).toSorted(), [...acknowledged.keys()].toSorted(), 'every name answered 201 is stored once, and no refused one')

  // Given its memory back (compose's maxmemory), it takes the retries: each stores its name once.
  const composeMaxMemory = durableFlags[durableFlags.indexOf('--maxmemory') + 1]!
  await durableAdmin.configSet('maxmemory', composeMaxMemory)
  const retried = await append('item-3', 'key-3')
  t.equal(retried.status, 201)
  t.equal(retried.headers.get('idempotent-replayed'), 'true', 'a retried append is replayed')
  const [refusedKey] = refusedKeys
  if (refusedKey === undefined) return
  const refusedIndex = Number(refusedKey.slice('flood-'.length))
  const retriedRefusal = await append(floodName(refusedIndex), refusedKey)
  t.equal(retriedRefusal.status, 201)
  t.equal(retriedRefusal.headers.get('idempotent-replayed'), null, 'a refused append retried is appended')
  t.same((await stored()).toSorted(), [...acknowledged.keys(), floodName(refusedIndex)].toSorted(), 'nothing stored twice')
})
