import t from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import type { Test } from 'tap'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, fixtures, mockUser, recordUnexpectedCalls } from '../helpers/upstream.ts'

// Replicas on one Redis share their answers, held bodies, budget and rate-limit counts.
const { inspector, replicas, reachedRedis } = await sharedRedis(t)

const TTL_MS = 60_000
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`
const HELLO = '/api/forge/repos?repo_name=hello'

/** Two replicas: the first answered the repository `hello` (and Redis holds it), the second's clock is `laterMs` on. */
async function answeredByOneThenLaterOnTwo(t: Test, laterMs: number) {
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

t.test('a shared held body outlives the answer TTL, twice over and a day at least, and each 304 renews it', async (t) => {
  const DAY_S = 24 * 60 * 60
  const heldLife = async () => {
    const [key] = await inspector.keys('*held:/repos/octocat/hello')
    return key === undefined ? -1 : inspector.pTTL(key)
  }
  for (const [ttlSeconds, lifeSeconds] of [[60, DAY_S], [DAY_S, 2 * DAY_S]] as const) {
    await inspector.flushDb()
    const [one, two] = await replicas(t, 2, { env: { FORGE_CACHE_TTL_SECONDS: ttlSeconds } })
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await one!.app.inject({ method: 'GET', url: HELLO })
    t.ok(await eventually(async () => (await heldLife()) > (lifeSeconds - 60) * 1000), `TTL ${ttlSeconds} s: held for ${lifeSeconds} s`)
    t.ok((await heldLife()) <= lifeSeconds * 1000, 'and no longer')
    // Nearly spent, as if the last use were long ago: the revalidation's 304 gives it a new life.
    const [key] = await inspector.keys('*held:/repos/octocat/hello')
    await inspector.pExpire(key!, 60_000)
    two!.advanceClock(ttlSeconds * 1000 + 1)
    const revalidation = nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } }).get('/repos/octocat/hello').reply(304, '', RESOURCE_HEADERS)
    t.equal((await two!.app.inject({ method: 'GET', url: HELLO })).headers['cache-status'], 'forge-aggregator; fwd=stale; stored')
    revalidation.done()
    t.ok(await eventually(async () => (await heldLife()) > (lifeSeconds - 60) * 1000), `TTL ${ttlSeconds} s: renewed by the 304`)
  }
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

t.test('RATE_LIMIT_PER_MINUTE counts in the shared Redis: replicas share each client’s count', async (t) => {
  const [one, two] = await replicas(t, 2, { env: { RATE_LIMIT_PER_MINUTE: 2 } })
  const statuses = []
  for (const replica of [one!, two!, one!]) statuses.push((await replica.app.inject({ method: 'GET', url: '/api/forge/users?user_name=not%20a%20login' })).statusCode)
  t.same(statuses, [400, 400, 429], 'the third request of the minute is refused, whichever replica it reaches')
  t.equal(await inspector.get('rate-limit:forge-aggregator:127.0.0.1'), '3', 'counted under the service’s own name')
})
