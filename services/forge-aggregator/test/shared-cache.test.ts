import t from 'tap'
import { createSecretKey, randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import nock from 'nock'
import { Agent } from 'undici'
import { createClient } from 'redis'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { namespaceFor } from '../src/shared-cache/plugin.ts'
import { callerOf, type UpstreamCredentials } from '../src/upstream/credentials.ts'
import { buildAggregator, testClock, type BuildOptions, type TestAggregator, type TestClock, type TestEnv } from './helpers/build.ts'
import { startLocalUpstream } from './helpers/local-upstream.ts'
import { answerRepository } from './helpers/repository-upstream.ts'
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
  return Promise.all(Array.from({ length: count }, () => buildAggregator(t, { clock, ...options, env: { REDIS_URL: redisUrl, ...options.env } })))
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
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 300 } })
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
  const [authorized] = await replicas(t, 1, { clock, env: { FORGE_TOKEN: TOKEN } })
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 1 }, RESOURCE_HEADERS)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 2 }, RESOURCE_HEADERS)
  const one = await anonymous!.app.inject({ method: 'GET', url: HELLO })
  const two = await authorized!.app.inject({ method: 'GET', url: HELLO })
  t.same(one.json(), { stars: 1, forksCount: fixtures.repository.forks_count })
  t.same(two.json(), { stars: 2, forksCount: fixtures.repository.forks_count }, 'asked the upstream with its own token')

  const keys = await inspector.keys('*')
  t.equal(new Set(keys.map((key) => key.split(':').slice(0, 3).join(':'))).size, 2, 'two partitions')
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
  await eventually(async () => (await inspector.keys('*budget:core')).length === 1)
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
  t.ok(await eventually(async () => (await inspector.keys('*answer:repo/octocat/hello')).length === 0))
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
  const [one, two] = await replicas(t, 2, { env: { FORGE_STALE_SECONDS: 10 } })
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
  const outages = one!.logs.lines.filter((line) => line.msg === 'Redis unavailable; reconnecting in the background')
  t.equal(outages.length, 1, 'logged once')

  await redis.start()
  t.ok(await eventually(async () => (await sharedAvailable(one!)) && (await sharedAvailable(two!))), 'reconnected by itself')
  nock(API).get('/repos/octocat/after').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  await reachedRedis('repo/octocat/after')
  const unexpected = recordUnexpectedCalls(t)
  const shared = await two!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  t.equal(shared.headers['cache-status'], 'forge-aggregator; hit; ttl=60')
  t.same(unexpected, [])
})

t.test('a request waiting on another replica’s production is let go at once when Redis goes away', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const pings = await pingsAnswered()
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  await waitingOnAnotherReplica(pings)
  const stopped = Date.now()
  await redis.stop()
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - stopped < 2_000, `answered ${Date.now() - stopped} ms after Redis went away, not after FORGE_TIMEOUT_MS`)
  await redis.start()
  t.ok(await eventually(() => sharedAvailable(one!)))
})

t.test('a production lock Redis does not grant in time is not waited for: the request is answered alone', async (t) => {
  const [one] = await replicas(t, 1)
  // Reads are answered, writes (the lock) are held back: a Redis that hangs between two commands.
  await inspector.sendCommand(['CLIENT', 'PAUSE', '1500', 'WRITE'])
  t.teardown(() => inspector.sendCommand(['CLIENT', 'UNPAUSE']))
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
})

t.test('a replica whose Redis never answers starts, answers from the upstream alone, says so on /metrics, and closes at once', async (t) => {
  // The helper waits for the shared cache, which never comes here: built as the helper builds it.
  const { loadConfig } = await import('@repo/config')
  const { createLogger } = await import('@repo/service-kit')
  const { buildApp } = await import('../src/app.ts')
  const { ForgeAggregatorConfig } = await import('../src/config.ts')
  const app = await buildApp(loadConfig(ForgeAggregatorConfig, { FORGE_API_URL: API, REDIS_URL: 'redis://127.0.0.1:1' }), { logger: createLogger('silent', process.stdout) })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const res = await app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.match((await app.inject({ url: '/metrics' })).body, /^forge_shared_store_up 0$/m)
  const closing = Date.now()
  await app.close()
  t.ok(Date.now() - closing < 1_000)
})

t.test('a request waiting on another replica’s production is let go within about a second when Redis hangs', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const pings = await pingsAnswered()
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  await waitingOnAnotherReplica(pings)
  const paused = Date.now()
  redis.pause()
  t.teardown(() => redis.resume())
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - paused < 1_500, `answered ${Date.now() - paused} ms after Redis hung, not after FORGE_TIMEOUT_MS`)
  redis.resume()
  t.ok(await eventually(() => sharedAvailable(one!)))
})

t.test('Redis paused (hung): requests are answered within about a second, and sharing resumes when it answers again', async (t) => {
  const [one, spare] = await replicas(t, 2)
  redis.pause()
  t.teardown(() => redis.resume())
  nock(API).get(/\/repos\/octocat\/h\d/).times(3).reply(200, fixtures.repository, RESOURCE_HEADERS)
  for (const name of ['h1', 'h2', 'h3']) {
    const started = Date.now()
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.statusCode, 200)
    t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
  }
  t.equal(one!.logs.lines.filter((line) => line.msg === 'Redis unavailable; reconnecting in the background').length, 1, 'logged once')
  // A read still waiting on the hung server is what makes closing wait.
  nock(API).get('/repos/octocat/spare').reply(200, fixtures.repository, RESOURCE_HEADERS)
  void spare!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=spare' })
  const closing = Date.now()
  await spare!.app.close()
  t.ok(Date.now() - closing < 1_500, `a replica stopping while Redis hangs does not hang with it (${Date.now() - closing} ms)`)
  redis.resume()
  t.ok(await eventually(() => sharedAvailable(one!)), 'answers are shared again')
  t.ok(one!.logs.lines.some((line) => line.msg === 'Redis connection ready'))
})

/** Waits until the answer at `key` has reached Redis: replicas write it without waiting. */
async function reachedRedis(key: string): Promise<void> {
  if (!(await eventually(async () => (await inspector.keys(`*answer:${key}`)).length === 1))) throw new Error(`${key} never reached Redis`)
}

async function namespaceOf(replica: TestAggregator, repo: string): Promise<string> {
  nock(API).get(`/repos/octocat/${repo}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
  await replica.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${repo}` })
  await eventually(async () => (await inspector.keys('*answer:*')).length > 0)
  const [key] = await inspector.keys('*answer:*')
  return key!.slice(0, key!.indexOf('answer:'))
}

/** Whether the replica's Redis answers, as its `/metrics` says. */
async function sharedAvailable(replica: TestAggregator): Promise<boolean> {
  return (await replica.metric('forge_shared_store_up')) === 1
}

/** How many PINGs Redis has answered: only a replica waiting on another's production sends them, one per probe interval. */
async function pingsAnswered(): Promise<number> {
  return Number(/^cmdstat_ping:calls=(\d+)/m.exec(await inspector.info('commandstats'))?.[1] ?? 0)
}

/** Resolves once a request has been waiting on another replica's production for a probe interval: its first PING. */
async function waitingOnAnotherReplica(pingsBefore: number): Promise<void> {
  if (!(await eventually(async () => (await pingsAnswered()) > pingsBefore))) throw new Error('no request waits on another replica')
}

t.test('RATE_LIMIT_PER_MINUTE counts in the shared Redis: replicas share each client’s count', async (t) => {
  const [one, two] = await replicas(t, 2, { env: { RATE_LIMIT_PER_MINUTE: 2 } })
  const statuses = []
  for (const replica of [one!, two!, one!]) statuses.push((await replica.app.inject({ method: 'GET', url: '/api/forge/users?user_name=not%20a%20login' })).statusCode)
  t.same(statuses, [400, 400, 429], 'the third request of the minute is refused, whichever replica it reaches')
  t.equal(await inspector.get('rate-limit:forge-aggregator:127.0.0.1'), '3', 'counted under the service’s own name')
})

t.test('the production lock is set with an expiry: a replica that dies holding it stops nobody for long', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  nock(API).get('/repos/octocat/hello').delay(300).reply(200, fixtures.repository, RESOURCE_HEADERS)
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  t.ok(await eventually(async () => (await inspector.keys('*lock:repo/octocat/hello')).length === 1), 'the lock is taken')
  const [lock] = await inspector.keys('*lock:repo/octocat/hello')
  const pttl = await inspector.pTTL(lock!)
  t.ok(pttl > 0 && pttl <= 10_000, `PTTL ${pttl} ms: set, and no longer than twice FORGE_TIMEOUT_MS`)
  t.equal((await answer).statusCode, 200)
})

t.test('a lock is released only by the replica holding it: a lock another replica took since stays', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  nock(API).get('/repos/octocat/hello').delay(300).reply(200, fixtures.repository, RESOURCE_HEADERS)
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  t.ok(await eventually(async () => (await inspector.keys('*lock:repo/octocat/hello')).length === 1))
  const [lock] = await inspector.keys('*lock:repo/octocat/hello')
  // What happens when the lock expired mid-production and another replica took it.
  await inspector.set(lock!, 'another-replica', { expiration: { type: 'PX', value: 60_000 } })
  t.equal((await answer).statusCode, 200)
  await reachedRedis('repo/octocat/hello')
  t.equal(await inspector.get(lock!), 'another-replica', 'the other replica’s lock is left alone')
})

t.test('the replica holding a lock releases it when its production ends', async (t) => {
  const [one] = await replicas(t, 1)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await one!.app.inject({ method: 'GET', url: HELLO })).statusCode, 200)
  t.ok(await eventually(async () => (await inspector.keys('*lock:*')).length === 0), 'no lock left behind')
})

t.test('a released lock is announced: a request waiting on another replica is answered within a second of the producer', async (t) => {
  const [one, two] = await replicas(t, 2, { env: { FORGE_TIMEOUT_MS: 10_000 } })
  const unexpected = recordUnexpectedCalls(t)
  nock(API).get('/repos/octocat/hello').delay(500).reply(200, fixtures.repository, RESOURCE_HEADERS)
  const produced = one!.app.inject({ method: 'GET', url: HELLO }).then((res) => ({ res, at: Date.now() }))
  t.ok(await eventually(async () => (await inspector.keys('*lock:repo/octocat/hello')).length === 1), 'one holds the lock')
  const waited = two!.app.inject({ method: 'GET', url: HELLO }).then((res) => ({ res, at: Date.now() }))
  const [producer, waiter] = await Promise.all([produced, waited])
  t.equal(producer.res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored')
  t.equal(waiter.res.headers['cache-status'], 'forge-aggregator; fwd=miss; collapsed')
  t.equal(waiter.res.body, producer.res.body)
  t.ok(waiter.at - producer.at < 1_000, `answered ${waiter.at - producer.at} ms after the producer, not after FORGE_TIMEOUT_MS`)
  t.same(unexpected, [], 'one upstream call for both')
})

t.test('a replica that stops mid-production releases and announces its lock: a request waiting on it elsewhere goes on at once', async (t) => {
  // The first upstream call (the stopping replica's) is never answered; later ones are at once.
  const held: ServerResponse[] = []
  const upstream = await startLocalUpstream(t, (request, response, index) => {
    if (index === 0) held.push(response)
    else answerRepository('octocat')(request, response)
  })
  // The stopping replica's dispatcher is the test's: closing the app does not wait for the call that hangs.
  const dispatcher = new Agent()
  t.teardown(() => dispatcher.destroy())
  const env = { FORGE_API_URL: upstream.url, FORGE_TIMEOUT_MS: 10_000 }
  const [stopping] = await replicas(t, 1, { env, dispatcher })
  const [other] = await replicas(t, 1, { env })
  const abandoned = stopping!.app.inject({ method: 'GET', url: HELLO })
  t.ok(await eventually(async () => held.length === 1), 'the stopping replica holds the lock and waits on the upstream')

  const pings = await pingsAnswered()
  let answered = false
  const waited = other!.app.inject({ method: 'GET', url: HELLO }).then((res) => ((answered = true), { res, at: Date.now() }))
  await waitingOnAnotherReplica(pings)
  t.notOk(answered, 'the other replica waits on that production')
  t.equal(upstream.requests.length, 1, 'rather than produce the answer alone')
  const closedAt = Date.now()
  await stopping!.app.close()
  const { res, at } = await waited
  t.equal(res.statusCode, 200)
  t.ok(at - closedAt < 1_000, `answered ${at - closedAt} ms after the stop, not after FORGE_TIMEOUT_MS`)
  t.equal(upstream.requests.length, 2, 'by a production of its own')
  t.ok(stopping!.logs.lines.some((line) => line.msg === 'production locks released at shutdown' && line.locks === 1))
  held[0]!.destroy()
  await abandoned
  t.same(await inspector.keys('*lock:*'), [], 'no lock left behind, the late end of the abandoned production included')
})

t.test('the cache partition changes with FORGE_API_URL, FORGE_FOLLOWERS_LIMIT, FORGE_MAX_REPO_PAGES and the token', async (t) => {
  const GHE = 'https://ghe.example.com/api/v3'
  const variants: [string, TestEnv, string][] = [
    ['FORGE_API_URL', { FORGE_API_URL: GHE }, 'https://ghe.example.com'],
    ['FORGE_FOLLOWERS_LIMIT', { FORGE_FOLLOWERS_LIMIT: 5 }, API],
    ['FORGE_MAX_REPO_PAGES', { FORGE_MAX_REPO_PAGES: 2 }, API],
    ['FORGE_TOKEN', { FORGE_TOKEN: 'ghp_partitiontesttoken00000000000000000000' }, API],
  ]
  for (const [name, env, origin] of variants) {
    await inspector.flushAll()
    const clock = testClock()
    const [base] = await replicas(t, 1, { clock })
    const [other] = await replicas(t, 1, { clock, env })
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await base!.app.inject({ method: 'GET', url: HELLO })
    await reachedRedis('repo/octocat/hello')
    const path = origin === API ? '/repos/octocat/hello' : '/api/v3/repos/octocat/hello'
    const own = nock(origin).get(path).reply(200, { ...fixtures.repository, stargazers_count: 7 }, RESOURCE_HEADERS)
    const res = await other!.app.inject({ method: 'GET', url: HELLO })
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored', `${name}: not a hit on the other deployment’s answer`)
    t.equal(res.json<{ stars: number }>().stars, 7, `${name}: its own answer`)
    own.done()
  }
})

t.test("a GitHub App's partition is its installation: another installation or App is another partition, a token never shares one", async (t) => {
  const settings = { FORGE_API_URL: API, FORGE_FOLLOWERS_LIMIT: 30, FORGE_MAX_REPO_PAGES: 10 }
  const app = (appId: string, installationId: string): UpstreamCredentials => ({ kind: 'app', appId, installationId, privateKey: createSecretKey(randomBytes(32)) })
  const partitionOf = (credentials: UpstreamCredentials) => namespaceFor(settings, callerOf(credentials))
  t.equal(partitionOf(app('1', '2')), partitionOf(app('1', '2')), 'one installation, whatever its key and tokens: one partition')
  const partitions = [
    partitionOf(app('1', '2')),
    partitionOf(app('1', '3')),
    partitionOf(app('4', '2')),
    partitionOf({ kind: 'token', token: '1:2' }),
    partitionOf({ kind: 'token', token: 'ghp_another' }),
    partitionOf({ kind: 'anonymous' }),
  ]
  t.equal(new Set(partitions).size, partitions.length, 'six partitions')
})

t.test('a newer answer another replica produced replaces an older one held here', async (t) => {
  const [one, two] = await replicas(t, 2)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 1 }, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  // Both replicas share one clock: past the TTL, the second one produces a newer answer.
  one!.advanceClock(TTL_MS + 1)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 2 }, { ...RESOURCE_HEADERS, etag: '"v2"' })
  const newer = await two!.app.inject({ method: 'GET', url: HELLO })
  t.equal(newer.json<{ stars: number }>().stars, 2)
  one!.advanceClock(TTL_MS + 1)
  nock(API).get(/.*/).reply(502, { message: 'Bad Gateway' }).persist()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; fwd-status=502; detail=stale-if-error')
  t.equal(res.body, newer.body, 'the other replica’s newer answer, not the older one held here')
})

t.test('a Redis entry that is not JSON or fails its schema is a miss, and counted', async (t) => {
  const [one] = await replicas(t, 1)
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}answer:repo/octocat/garbled`, 'not json', { expiration: { type: 'PX', value: 60_000 } })
  await inspector.set(`${namespace}answer:repo/octocat/shapeless`, JSON.stringify({ body: 1 }), { expiration: { type: 'PX', value: 60_000 } })
  for (const name of ['garbled', 'shapeless']) {
    const scope = nock(API).get(`/repos/octocat/${name}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored', name)
    scope.done()
  }
  t.equal(await one!.metric('forge_shared_entries_rejected_total', { kind: 'answer' }), 2)
  t.equal(await one!.metric('forge_shared_entries_rejected_total', { kind: 'held' }), 0)
})

t.test('an entry read back whole, or a key Redis does not hold, is not counted as rejected; every kind is shown from the start', async (t) => {
  const [one, two] = await replicas(t, 2)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  const res = await two!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.headers['cache-status'], 'forge-aggregator; hit; ttl=60', "the first replica's answer, read from Redis")
  for (const [name, replica] of [['the replica that missed', one!], ['the replica that read it', two!]] as const) {
    for (const kind of ['answer', 'held', 'budget']) t.equal(await replica.metric('forge_shared_entries_rejected_total', { kind }), 0, `${name}: ${kind}`)
  }
})

t.test('a Redis that cannot answer reads as a miss, never as a rejected entry', async (t) => {
  const own = await startPrivateRedis({ durable: false })
  t.teardown(() => own.dispose())
  const replica = await buildAggregator(t, { env: { REDIS_URL: `redis://127.0.0.1:${own.port}` } })
  await own.stop()
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await replica.app.inject({ method: 'GET', url: HELLO })).statusCode, 200)
  for (const kind of ['answer', 'held', 'budget']) t.equal(await replica.metric('forge_shared_entries_rejected_total', { kind }), 0, kind)
})

t.test('the key namespace carries the stored format’s version', async (t) => {
  const [one] = await replicas(t, 1)
  const namespace = await namespaceOf(one!, 'probe')
  t.match(namespace, /^forge:v2:[\w-]{16}:$/)
})
