import t from 'tap'
import nock from 'nock'
import { createClient } from 'redis'
import { pino } from 'pino'
import { startPrivateRedis } from '@repo/test-support'
import { createRedisStore } from '../src/redis-store.ts'
import { buildAggregator, testClock, type BuildOptions, type TestClock } from './helpers/build.ts'
import { API, RESOURCE_HEADERS, fixtures, makeFollowers, makeRepos, makeUser, mockUser, recordUnexpectedCalls, searchResult, SEARCH_HEADERS } from './helpers/upstream.ts'

// A cache needs no durability: without fsync on every write, a loaded machine does not slow it down.
const redis = await startPrivateRedis({ durable: false })
const redisUrl = `redis://127.0.0.1:${redis.port}`
const inspector = createClient({ url: redisUrl })
// The tests stop this Redis on purpose; the inspector only reconnects.
inspector.on('error', () => {})
await inspector.connect()
t.teardown(async () => {
  await inspector.close()
  await redis.dispose()
})
t.afterEach(async () => {
  nock.cleanAll()
  await inspector.flushAll()
})

const TTL_MS = 60_000
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`
const HELLO = '/api/forge/repos?repo_name=hello'

/** `count` replicas sharing the private Redis and one clock. */
async function replicas(t: Parameters<typeof buildAggregator>[0], count: number, options: BuildOptions = {}) {
  const clock: TestClock = options.clock ?? testClock()
  return Promise.all(Array.from({ length: count }, () => buildAggregator(t, { redisUrl, clock, ...options })))
}

/** Two replicas: the first answered the repository `hello` (and Redis holds it), the second's clock is `laterMs` on. */
async function answeredByOneThenLaterOnTwo(t: Parameters<typeof buildAggregator>[0], laterMs: number) {
  const [one, two] = await replicas(t, 2)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const first = await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  two!.advanceClock(laterMs)
  return { first, two: two! }
}

t.test('an answer produced by one replica is a hit on the others: no upstream call', async (t) => {
  const [one, two, three] = await replicas(t, 3)
  const scope = mockUser({ login: 'mona' })
  const first = await one!.app.inject({ method: 'GET', url: usersUrl('mona') })
  scope.done()
  await reachedRedis('users/mona')
  const unexpected = recordUnexpectedCalls(t)
  for (const replica of [two!, three!]) {
    const res = await replica.app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(res.statusCode, 200)
    t.equal(res.body, first.body)
    t.equal(res.headers.etag, first.headers.etag)
    t.equal(res.headers['cache-status'], 'forge-aggregator; hit; ttl=60')
  }
  t.same(unexpected, [])
})

t.test('200 concurrent requests for one cold user over 3 replicas cost the five calls of one', async (t) => {
  const apps = await replicas(t, 3)
  const unexpected = recordUnexpectedCalls(t)
  const scope = nock(API)
  scope.get('/users/mona').delay(100).reply(200, makeUser('mona', { public_repos: 2 }), RESOURCE_HEADERS)
  scope.get('/users/mona/repos').query(true).delay(100).reply(200, makeRepos('mona', 2), RESOURCE_HEADERS)
  scope.get('/users/mona/followers').query(true).delay(100).reply(200, makeFollowers(1), RESOURCE_HEADERS)
  scope.get('/search/issues').query(true).times(2).delay(100).reply(200, searchResult(1), SEARCH_HEADERS)
  const answers = await Promise.all(
    Array.from({ length: 200 }, (_, index) => apps[index % 3]!.app.inject({ method: 'GET', url: usersUrl('mona') })),
  )
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]))
  t.equal(new Set(answers.map((res) => res.body)).size, 1, 'every caller got the same answer')
  scope.done()
  t.same(unexpected, [], 'five calls, no more')
  const statuses = new Set(answers.map((res) => res.headers['cache-status']))
  t.ok(statuses.has('forge-aggregator; fwd=miss; collapsed'), 'the other replicas waited on the one production')
})

t.test('a replica whose production lock is held by a dead replica produces the answer itself after FORGE_TIMEOUT_MS', async (t) => {
  const [one] = await replicas(t, 1, { config: { FORGE_TIMEOUT_MS: 300 } })
  const locks = await inspector.keys('forge:*')
  t.same(locks, [])
  // What a replica that died mid-production leaves behind: a lock with an expiry, and no answer.
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  await inspector.del(`${namespace}answer:repo/octocat/hello`)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  const waited = Date.now() - started
  t.equal(res.statusCode, 200)
  t.ok(waited >= 250 && waited < 1_500, `waited ${waited} ms, bounded by FORGE_TIMEOUT_MS`)
})

t.test('deployments with different tokens sharing one Redis never see each other’s answers; the token is never written', async (t) => {
  const TOKEN = 'ghp_sharedtesttoken00000000000000000000000'
  const clock = testClock()
  const [anonymous] = await replicas(t, 1, { clock })
  const [authorized] = await replicas(t, 1, { clock, config: { FORGE_TOKEN: TOKEN } })
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 1 }, RESOURCE_HEADERS)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 2 }, RESOURCE_HEADERS)
  const one = await anonymous!.app.inject({ method: 'GET', url: HELLO })
  const two = await authorized!.app.inject({ method: 'GET', url: HELLO })
  t.same(one.json(), { stars: 1, forksCount: fixtures.repository.forks_count })
  t.same(two.json(), { stars: 2, forksCount: fixtures.repository.forks_count }, 'asked the upstream with its own token')

  const keys = await inspector.keys('*')
  t.equal(new Set(keys.map((key) => key.split(':').slice(0, 2).join(':'))).size, 2, 'two partitions')
  for (const key of keys) {
    t.notMatch(key, TOKEN)
    t.notMatch((await inspector.get(key)) ?? '', TOKEN, `${key} holds no token`)
    t.not(await inspector.pTTL(key), -1, `${key} expires`)
  }
})

t.test('a rate limit one replica met stops every replica: no call, 403 with Retry-After', async (t) => {
  const [one, two] = await replicas(t, 2)
  const reset = Math.floor(one!.now() / 1000) + 300
  const spent = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset), 'x-ratelimit-limit': '60', 'x-ratelimit-resource': 'core' }
  nock(API).get('/repos/octocat/a').reply(403, { message: 'API rate limit exceeded' }, spent)
  const limited = await one!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=a' })
  t.equal(limited.statusCode, 403)
  await eventuallyTrue(async () => (await inspector.keys('*budget:core')).length === 1)
  const unexpected = recordUnexpectedCalls(t)
  const res = await two!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=b' })
  t.equal(res.statusCode, 403)
  t.equal(res.headers['retry-after'], '300')
  t.same(unexpected, [])
})

t.test('held bodies are shared: after the TTL another replica revalidates with the first one’s ETag', async (t) => {
  const { two } = await answeredByOneThenLaterOnTwo(t, TTL_MS + 1)
  const revalidation = nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } }).get('/repos/octocat/hello').reply(304, '', RESOURCE_HEADERS)
  const res = await two.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=stale; stored')
  revalidation.done()
})

t.test('stale-if-error across replicas: the answer another replica produced is sent when the upstream fails', async (t) => {
  const { first, two } = await answeredByOneThenLaterOnTwo(t, TTL_MS + 5_000)
  nock(API).get(/.*/).reply(502, { message: 'Bad Gateway' }).persist()
  const res = await two.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.equal(res.body, first.body)
  t.equal(res.headers.age, '65')
})

t.test('a 404 on one replica drops the shared answer: the others no longer have it to send stale', async (t) => {
  const { two } = await answeredByOneThenLaterOnTwo(t, TTL_MS + 1)
  nock(API).get('/repos/octocat/hello').reply(404, { message: 'Not Found' })
  t.equal((await two.app.inject({ method: 'GET', url: HELLO })).statusCode, 404)
  t.ok(await eventuallyTrue(async () => (await inspector.keys('*answer:repo/octocat/hello')).length === 0))
})

t.test('of two productions of one answer, the later is the one kept and sent stale', async (t) => {
  const [one] = await replicas(t, 1)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 2 }, RESOURCE_HEADERS)
  const later = await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  const [key] = await inspector.keys('*answer:repo/octocat/hello')
  const older = JSON.parse((await inspector.get(key!))!) as { producedAt: number; body: string }
  await inspector.set(key!, JSON.stringify({ ...older, producedAt: older.producedAt - 1_000, body: '{"stars":1,"forksCount":0}' }))
  one!.advanceClock(TTL_MS + 1)
  nock(API).get(/.*/).reply(502, { message: 'Bad Gateway' }).persist()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.body, later.body)
})

t.test('a shared answer past TTL + FORGE_STALE_SECONDS is not sent, even while Redis still holds it', async (t) => {
  const [one, two] = await replicas(t, 2, { config: { FORGE_STALE_SECONDS: 10 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  two!.advanceClock(TTL_MS + 10_001)
  nock(API).get(/.*/).reply(502, { message: 'Bad Gateway' }).persist()
  t.equal((await two!.app.inject({ method: 'GET', url: HELLO })).statusCode, 500)
})

t.test('Redis killed mid-test: requests are answered from the upstream, the outage is logged once, and sharing resumes after a restart', async (t) => {
  const [one, two] = await replicas(t, 2)
  await redis.stop()
  nock(API).get(/\/repos\/octocat\/r\d/).times(3).reply(200, fixtures.repository, RESOURCE_HEADERS)
  for (const name of ['r1', 'r2', 'r3']) {
    const started = Date.now()
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.statusCode, 200)
    t.ok(Date.now() - started < 1_000, 'within a second')
  }
  const outages = one!.logLines.filter((line) => line.includes('Redis unavailable'))
  t.equal(outages.length, 1, 'logged once')

  await redis.start()
  t.ok(await eventuallyTrue(async () => (await sharedAvailable(one!)) && (await sharedAvailable(two!))), 'reconnected by itself')
  nock(API).get('/repos/octocat/after').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  await reachedRedis('repo/octocat/after')
  const unexpected = recordUnexpectedCalls(t)
  const shared = await two!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  t.equal(shared.headers['cache-status'], 'forge-aggregator; hit; ttl=60')
  t.same(unexpected, [])
})

t.test('a request waiting on another replica’s production is let go at once when Redis goes away', async (t) => {
  const [one] = await replicas(t, 1, { config: { FORGE_TIMEOUT_MS: 5_000 } })
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  await eventuallyTrue(async () => one!.logLines.length > 0 && Date.now() - started > 100)
  await redis.stop()
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - started < 2_000, `answered in ${Date.now() - started} ms, not after FORGE_TIMEOUT_MS`)
  await redis.start()
  t.ok(await eventuallyTrue(() => sharedAvailable(one!)))
})

t.test('a production lock Redis does not grant in time is not waited for: the request is answered alone', async (t) => {
  const [one] = await replicas(t, 1, { redisDeadlineMs: 250 })
  // Reads are answered, writes (the lock) are held back: a Redis that hangs between two commands.
  await inspector.sendCommand(['CLIENT', 'PAUSE', '1500', 'WRITE'])
  t.teardown(() => inspector.sendCommand(['CLIENT', 'UNPAUSE']))
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
})

t.test('a store whose Redis never answers reads empty, takes no lock, and closes at once', async (t) => {
  const store = createRedisStore({ url: 'redis://127.0.0.1:1', namespace: 'forge:test:', logger: pino({ level: 'silent' }) })
  t.equal(store.isAvailable, false)
  t.equal(await store.get('answer:x'), undefined)
  t.equal(await store.lock('x', 1_000), undefined)
  await store.set('answer:x', 'value', 1_000)
  await store.close()
})

t.test('a request waiting on another replica’s production is let go within about a second when Redis hangs', async (t) => {
  const [one] = await replicas(t, 1, { config: { FORGE_TIMEOUT_MS: 5_000 }, redisDeadlineMs: 250 })
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  await eventuallyTrue(async () => Date.now() - started > 100)
  redis.pause()
  t.teardown(() => redis.resume())
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - started < 1_500, `answered in ${Date.now() - started} ms, not after FORGE_TIMEOUT_MS`)
  redis.resume()
  t.ok(await eventuallyTrue(() => sharedAvailable(one!)))
})

t.test('Redis paused (hung): requests are answered within about a second, and sharing resumes when it answers again', async (t) => {
  const [one, spare] = await replicas(t, 2, { redisDeadlineMs: 250 })
  redis.pause()
  t.teardown(() => redis.resume())
  nock(API).get(/\/repos\/octocat\/h\d/).times(3).reply(200, fixtures.repository, RESOURCE_HEADERS)
  for (const name of ['h1', 'h2', 'h3']) {
    const started = Date.now()
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.statusCode, 200)
    t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
  }
  t.equal(one!.logLines.filter((line) => line.includes('Redis unavailable')).length, 1, 'logged once')
  // A read still waiting on the hung server is what makes closing wait.
  void spare!.shared!.get('anything')
  const closing = Date.now()
  await spare!.shared!.close()
  t.ok(Date.now() - closing < 1_000, 'a replica stopping while Redis hangs does not hang with it')
  redis.resume()
  t.ok(await eventuallyTrue(() => sharedAvailable(one!)), 'answers are shared again')
  t.ok(one!.logLines.some((line) => line.includes('Redis available again')))
})

/** Waits until the answer at `key` has reached Redis: replicas write it without waiting. */
async function reachedRedis(key: string): Promise<void> {
  if (!(await eventuallyTrue(async () => (await inspector.keys(`*answer:${key}`)).length === 1))) throw new Error(`${key} never reached Redis`)
}

async function namespaceOf(replica: Awaited<ReturnType<typeof buildAggregator>>, repo: string): Promise<string> {
  nock(API).get(`/repos/octocat/${repo}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
  await replica.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${repo}` })
  await eventuallyTrue(async () => (await inspector.keys('*answer:*')).length > 0)
  const [key] = await inspector.keys('*answer:*')
  return key!.slice(0, key!.indexOf('answer:'))
}

async function sharedAvailable(replica: Awaited<ReturnType<typeof buildAggregator>>): Promise<boolean> {
  return replica.shared?.isAvailable ?? false
}

async function eventuallyTrue(condition: () => Promise<boolean>): Promise<boolean> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (await condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return false
}

t.test('RATE_LIMIT_PER_MINUTE counts in the shared Redis: replicas share each client’s count', async (t) => {
  const [one, two] = await replicas(t, 2, { config: { RATE_LIMIT_PER_MINUTE: 2 } })
  const statuses = []
  for (const replica of [one!, two!, one!]) statuses.push((await replica.app.inject({ method: 'GET', url: '/api/forge/users?user_name=not%20a%20login' })).statusCode)
  t.same(statuses, [400, 400, 429], 'the third request of the minute is refused, whichever replica it reaches')
  t.equal(await inspector.get('rate-limit:forge-aggregator:127.0.0.1'), '3', 'counted under the service’s own name')
})
