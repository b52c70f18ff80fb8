import t from 'tap'
import { fileURLToPath } from 'node:url'
import { createClient } from 'redis'
import { composeRedisFlags, LISTENING, nodePath, runProcess, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS } from '@repo/test-support'
import repository from './fixtures/repository.json' with { type: 'json' }
import recordedHeaders from './fixtures/headers.json' with { type: 'json' }
import { buildAggregator } from './helpers/build.ts'
import { startLocalUpstream } from './helpers/local-upstream.ts'

/**
 * DESIGN §11's bar for the data tier: flooding the aggregator with cold requests never evicts an
 * idempotency record. The two Redis servers run with the flags docker-compose.yml gives them
 * (read from the file, not copied) and the real ACL users; only the cache's maxmemory is made
 * smaller, so that a few dozen requests fill it.
 */
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const CACHE_MAX_MEMORY = 8 * 2 ** 20

const durable = await startRedisWithServiceUsers({ args: await composeRedisFlags('redis') })
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

/** A field of Redis's INFO, as a number (0 when absent). */
async function info(client: typeof cacheAdmin, section: string, field: string): Promise<number> {
  return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(await client.info(section))?.[1] ?? 0)
}

/** A repository whose upstream body is about 200 KB: the aggregator holds each body for revalidation. */
const LARGE_DESCRIPTION = 'x'.repeat(200 * 1024)

t.test('cold users flooding the aggregator past its cache’s maxmemory: the cache evicts, every idempotency record and name survives, a retried append is replayed', async (t) => {
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
  const names = Array.from({ length: 20 }, (_, index) => `item-${index}`)
  for (const [index, name] of names.entries()) t.equal((await append(name, `key-${index}`)).status, 201)

  const upstream = await startLocalUpstream(t, (request, response) => {
    const name = /^\/repos\/octocat\/([^/?]+)$/.exec(request.url ?? '')?.[1] ?? 'unknown'
    response.writeHead(200, recordedHeaders.resource).end(JSON.stringify({ ...repository, name, full_name: `octocat/${name}`, description: LARGE_DESCRIPTION }))
  })
  const { app } = await buildAggregator(t, {
    env: {
      FORGE_API_URL: upstream.url,
      REDIS_URL: `redis://127.0.0.1:${cache.port}`,
      REDIS_USERNAME: TEST_REDIS_USERS.forgeAggregator.username,
      REDIS_PASSWORD: TEST_REDIS_USERS.forgeAggregator.password,
    },
  })
  // Twice maxmemory in held bodies alone, ten cold requests at a time.
  const coldRequests = Math.ceil((2 * CACHE_MAX_MEMORY) / LARGE_DESCRIPTION.length)
  const statuses = new Set<number>()
  for (let batch = 0; batch < coldRequests; batch += 10) {
    const answers = await Promise.all(Array.from({ length: 10 }, (_, index) => app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=cold-${batch + index}` })))
    for (const answer of answers) statuses.add(answer.statusCode)
  }
  t.same([...statuses], [200], 'every cold request answered')

  t.ok((await info(cacheAdmin, 'stats', 'evicted_keys')) > 0, 'the cache Redis evicted entries to make room (allkeys-lru)')
  t.equal(await info(cacheAdmin, 'errorstats', 'errorstat_OOM'), 0, 'and refused no write')
  t.ok((await info(cacheAdmin, 'memory', 'used_memory')) <= CACHE_MAX_MEMORY * 1.1, 'within its maxmemory')

  t.equal(await info(durableAdmin, 'stats', 'evicted_keys'), 0, 'the durable Redis evicted nothing')
  t.equal((await durableAdmin.keys('items:idempotency:*')).length, names.length, 'every idempotency record survives')
  t.same(await durableAdmin.lRange('items', 0, -1), names, 'every name survives')
  const retried = await append('item-3', 'key-3')
  t.equal(retried.status, 201)
  t.equal(retried.headers.get('idempotent-replayed'), 'true', 'a retried append is replayed')
  t.same(await durableAdmin.lRange('items', 0, -1), names, 'not stored again')
})
