import t, { type Test } from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import { pino } from 'pino'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from '../../src/upstream/errors.ts'
import { buildAggregator, testClock, type TestClock, type TestEnv } from '../helpers/build.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { API, PINNED_HEADERS, RESOURCE_HEADERS, recordUnexpectedCalls } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const TOKEN = 'ghp_clienttesttoken000000000000000000000000'

/**
 * Any JSON object or list, every field kept: what these tests ask of a body (the service's own
 * schemas are tested through the app; projections in test/upstream/projection.test.ts).
 */
const BODY = TypeCompiler.Compile(Type.Union([Type.Object({}, { additionalProperties: Type.Unknown() }), Type.Array(Type.Unknown())]))

/**
 * The client as the app builds it and holds it (`app.forge.client`): its budget, interceptors
 * and held bodies wired by the forge plugin from the configuration, upstream at nock's API
 * unless `env` says otherwise, no budget reserve, on `clock` (one of its own unless given).
 */
async function openClient(t: Test, env: TestEnv = {}, clock: TestClock = testClock()) {
  const { app } = await buildAggregator(t, { env: { FORGE_BUDGET_RESERVE: 0, FORGE_TIMEOUT_MS: 2_000, ...env }, clock })
  return app.forge.client
}

t.test('every request carries the pinned version, the vnd.github Accept and a User-Agent, and no Authorization without a token', async (t) => {
  const client = await openClient(t)
  const scope = nock(API, { reqheaders: PINNED_HEADERS, badheaders: ['authorization'] }).get('/users/mona').reply(200, { login: 'mona' })
  t.same(await client.get('/users/mona', BODY), { login: 'mona' })
  scope.done()
})

t.test('with a token every request carries Authorization: Bearer <token>', async (t) => {
  const client = await openClient(t, { FORGE_TOKEN: TOKEN })
  const scope = nock(API, { reqheaders: { authorization: `Bearer ${TOKEN}` } }).get('/user').reply(200, { login: 'mona' })
  await client.get('/user', BODY)
  scope.done()
})

t.test('query values are encoded into the query string', async (t) => {
  const client = await openClient(t)
  const scope = nock(API).get('/search/issues').query({ q: 'author:mona is:pr', per_page: '1' }).reply(200, { total_count: 2 })
  await client.get('/search/issues', BODY, { q: 'author:mona is:pr', per_page: 1 })
  scope.done()
})

t.test('a GitHub Enterprise base URL keeps its /api/v3 prefix', async (t) => {
  const client = await openClient(t, { FORGE_API_URL: 'https://ghe.example.com/api/v3/' })
  const scope = nock('https://ghe.example.com').get('/api/v3/users/mona').reply(200, { login: 'mona' })
  await client.get('/users/mona', BODY)
  scope.done()
})

t.test('404 becomes UpstreamNotFound, 403 and 429 UpstreamRateLimited, 401 UpstreamFailure', async (t) => {
  nock(API).get('/a').reply(404, { message: 'Not Found' })
  nock(API).get('/b').reply(403, { message: 'Forbidden' })
  nock(API).get('/c').reply(429, { message: 'Too Many Requests' })
  nock(API).get('/d').reply(401, { message: 'Bad credentials' })
  // A 429 stops every later call until it has been waited out: each call gets a client of its own.
  await t.rejects((await openClient(t)).get('/a', BODY), UpstreamNotFound)
  await t.rejects((await openClient(t)).get('/b', BODY), UpstreamRateLimited)
  await t.rejects((await openClient(t)).get('/c', BODY), UpstreamRateLimited)
  await t.rejects((await openClient(t)).get('/d', BODY), new UpstreamFailure('Upstream responded 401: Bad credentials', 401))
})

t.test('Retry-After is the upstream Retry-After (seconds or date), else the reset when nothing remains, else 60 for a 429 or a secondary limit', async (t) => {
  // One clock for every client: a rate limit stops later calls, so each path is asked of a client of its own.
  const clock = testClock()
  const now = clock.now()
  const nowSeconds = now / 1000
  const spent = { 'x-ratelimit-remaining': '0' }
  nock(API).get('/seconds').reply(403, {}, { 'retry-after': '42', 'x-ratelimit-reset': '1', ...spent })
  nock(API).get('/date').reply(429, {}, { 'retry-after': new Date(now + 30_000).toUTCString() })
  nock(API).get('/reset').reply(403, {}, { 'x-ratelimit-reset': String(nowSeconds + 90), ...spent })
  nock(API).get('/past').reply(403, {}, { 'x-ratelimit-reset': String(nowSeconds - 10), ...spent })
  nock(API).get('/forbidden').reply(403, { message: 'Resource not accessible' }, { 'x-ratelimit-reset': String(nowSeconds + 3000), 'x-ratelimit-remaining': '4000' })
  nock(API).get('/too-many').reply(429, {}, { 'x-ratelimit-reset': String(nowSeconds + 3000), 'x-ratelimit-remaining': '12' })
  nock(API).get('/secondary').reply(403, { message: 'You have exceeded a secondary rate limit.' })
  nock(API).get('/none').reply(403, {})
  const retryAfter = async (path: string) =>
    ((await (await openClient(t, {}, clock)).get(path, BODY).catch((error: unknown) => error)) as UpstreamRateLimited).retryAfterSeconds
  t.equal(await retryAfter('/seconds'), 42)
  t.equal(await retryAfter('/date'), 30)
  t.equal(await retryAfter('/reset'), 90)
  t.equal(await retryAfter('/past'), 0)
  t.equal(await retryAfter('/forbidden'), undefined, 'a plain forbidden with quota left gives no advice')
  t.equal(await retryAfter('/too-many'), 60)
  t.equal(await retryAfter('/secondary'), 60)
  t.equal(await retryAfter('/none'), undefined)
})

t.test("a secondary rate limit known only from its body blocks every call for GitHub's minute", async (t) => {
  const clock = testClock()
  const client = await openClient(t, {}, clock)
  const unexpected = recordUnexpectedCalls(t)
  nock(API).get('/secondary').reply(403, { message: 'You have exceeded a secondary rate limit.' }, { 'x-ratelimit-remaining': '4000' })
  await client.get('/secondary', BODY).catch(() => undefined)
  clock.advance(59_000)
  await t.rejects(client.get('/users/a', BODY), { name: 'BudgetSpent', retryAfterSeconds: 1 })
  clock.advance(1_001)
  nock(API).get('/users/a').reply(200, { login: 'a' })
  t.same(await client.get('/users/a', BODY), { login: 'a' })
  t.same(unexpected, [])
})

t.test('502, 503 and 504 are retried twice with backoff, then answered as they are', async (t) => {
  const client = await openClient(t)
  for (const status of [502, 503, 504]) {
    const scope = nock(API).get(`/flaky-${status}`).times(2).reply(status, { message: 'try again' }).get(`/flaky-${status}`).reply(200, { ok: true })
    t.same(await client.get(`/flaky-${status}`, BODY), { ok: true }, `${status} then 200`)
    scope.done()
  }
  const scope = nock(API).get('/down').times(3).reply(503, { message: 'Service Unavailable' })
  await t.rejects(client.get('/down', BODY), new UpstreamFailure('Upstream responded 503: Service Unavailable', 503))
  scope.done()
})

t.test('403, 429, 404, 401 and 500 are never retried', async (t) => {
  const unexpected = recordUnexpectedCalls(t)
  for (const status of [403, 429, 404, 401, 500]) {
    const scope = nock(API).get(`/once-${status}`).once().reply(status, { message: 'no' })
    await (await openClient(t)).get(`/once-${status}`, BODY).catch(() => undefined)
    scope.done()
  }
  t.same(unexpected, [], 'one call each')
})

t.test('a connection reset is retried', async (t) => {
  const upstream = await startLocalUpstream(t, (request, response, index) => {
    if (index === 0) request.socket.destroy()
    else response.end(JSON.stringify({ ok: true }))
  })
  const client = await openClient(t, { FORGE_API_URL: upstream.url })
  t.same(await client.get('/reset-once', BODY), { ok: true })
  t.equal(upstream.requests.length, 2)
})

t.test('concurrent identical GETs share one upstream call', async (t) => {
  const client = await openClient(t)
  // The one call is answered once it has reached the upstream: all ten were made before it could be.
  const { promise: reached, resolve: reachedUpstream } = Promise.withResolvers<void>()
  const scope = nock(API)
    .get('/users/mona')
    .once()
    .reply(async () => {
      reachedUpstream()
      return [200, { login: 'mona' }]
    })
  const gets = Array.from({ length: 10 }, () => client.get('/users/mona', BODY))
  await reached
  const bodies = await Promise.all(gets)
  t.same(new Set(bodies.map((body) => JSON.stringify(body))), new Set([JSON.stringify({ login: 'mona' })]))
  scope.done()
})

// compose() wraps each interceptor around the ones before it (the last is outermost): with
// deduplication outside retry, a request arriving while the first one waits out its backoff
// joins it instead of starting a call of its own. Inside-out, the upstream would see three.
t.test('deduplication sits outside retry: a request arriving during a retry backoff joins the retried call', async (t) => {
  const upstream = await startLocalUpstream(t, (_request, response, index) => {
    if (index === 0) response.writeHead(503).end('{"message":"busy"}')
    else response.end(JSON.stringify({ login: 'mona' }))
  })
  const client = await openClient(t, { FORGE_API_URL: upstream.url })
  const first = client.get('/users/mona', BODY)
  // The first try has reached the upstream: its 503 starts the retry's backoff (100 ms).
  await eventually(async () => upstream.requests.length === 1)
  const second = client.get('/users/mona', BODY)
  t.same(await Promise.all([first, second]), [{ login: 'mona' }, { login: 'mona' }])
  t.equal(upstream.requests.length, 2, 'the failed try and its retry, nothing else')
})

t.test('the deadline covers the whole call, retries included', async (t) => {
  const upstream = await startLocalUpstream(t, (_request, response, index) => {
    if (index === 0) response.writeHead(503).end()
    // The retry never gets an answer.
  })
  const client = await openClient(t, { FORGE_API_URL: upstream.url, FORGE_TIMEOUT_MS: 400 })
  const started = Date.now()
  await t.rejects(client.get('/slow', BODY), new UpstreamFailure('Upstream did not answer within 400 ms'))
  t.ok(Date.now() - started < 1_500)
})

t.test('a held resource is asked with If-None-Match, and a 304 answers with the held body', async (t) => {
  const client = await openClient(t)
  nock(API, { badheaders: ['if-none-match'] }).get('/users/mona').reply(200, { login: 'mona', bio: 'held' }, RESOURCE_HEADERS)
  const revalidation = nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } }).get('/users/mona').reply(304, '', RESOURCE_HEADERS)
  await client.get('/users/mona', BODY)
  t.same(await client.get('/users/mona', BODY), { login: 'mona', bio: 'held' })
  revalidation.done()
})

t.test('a new ETag replaces the held body', async (t) => {
  const client = await openClient(t)
  nock(API).get('/users/mona').reply(200, { v: 1 }, { etag: '"one"' })
  nock(API, { reqheaders: { 'if-none-match': '"one"' } }).get('/users/mona').reply(200, { v: 2 }, { etag: '"two"' })
  const latest = nock(API, { reqheaders: { 'if-none-match': '"two"' } }).get('/users/mona').reply(304, '')
  await client.get('/users/mona', BODY)
  await client.get('/users/mona', BODY)
  t.same(await client.get('/users/mona', BODY), { v: 2 })
  latest.done()
})

t.test('bodies without an ETag (searches) are not held', async (t) => {
  const client = await openClient(t)
  nock(API).get('/search/issues').query(true).reply(200, { total_count: 1 })
  const again = nock(API, { badheaders: ['if-none-match'] }).get('/search/issues').query(true).reply(200, { total_count: 2 })
  await client.get('/search/issues', BODY, { q: 'x' })
  t.same(await client.get('/search/issues', BODY, { q: 'x' }), { total_count: 2 })
  again.done()
})

/**
 * What FORGE_CACHE_MAX_MB=1 leaves the held bodies, in characters of their text and ETag: two
 * thirds, answers having the third rounded down (cache/response-cache-plugin.test.ts). Written
 * out, not asked of `cacheMemory`, whose share is what this checks.
 */
const HELD_BOUND = 1024 * 1024 - 349_525

/** A JSON body of exactly `length` characters. */
const bodyOfLength = (length: number) => `{"padding":"${'x'.repeat(length - 14)}"}`

t.test('held bodies are sized by their text and ETag: one that just fits the bound is held and reparsed on a 304', async (t) => {
  const client = await openClient(t, { FORGE_CACHE_MAX_MB: 1 })
  const text = bodyOfLength(HELD_BOUND - '"fits"'.length)
  nock(API).get('/fits').reply(200, text, { etag: '"fits"', 'content-type': 'application/json' })
  const again = nock(API, { reqheaders: { 'if-none-match': '"fits"' } }).get('/fits').reply(304, '')
  await client.get('/fits', BODY)
  t.same(await client.get('/fits', BODY), JSON.parse(text))
  again.done()
})

t.test('held bodies are bounded: one a character over the bound is not held', async (t) => {
  const client = await openClient(t, { FORGE_CACHE_MAX_MB: 1 })
  nock(API).get('/big').reply(200, bodyOfLength(HELD_BOUND - '"big"'.length + 1), { etag: '"big"', 'content-type': 'application/json' })
  const again = nock(API, { badheaders: ['if-none-match'] }).get('/big').reply(200, { padding: 'y' }, { etag: '"big2"' })
  await client.get('/big', BODY)
  await client.get('/big', BODY)
  again.done()
})

t.test('with caching off (FORGE_CACHE_TTL_SECONDS 0) nothing is held', async (t) => {
  const client = await openClient(t, { FORGE_CACHE_TTL_SECONDS: 0 })
  nock(API).get('/users/mona').reply(200, { login: 'mona' }, RESOURCE_HEADERS)
  const again = nock(API, { badheaders: ['if-none-match'] }).get('/users/mona').reply(200, { login: 'mona' }, RESOURCE_HEADERS)
  await client.get('/users/mona', BODY)
  await client.get('/users/mona', BODY)
  again.done()
})

t.test('an unexpected 304 (nothing held) is a failure, not an empty answer', async (t) => {
  const client = await openClient(t)
  nock(API).get('/odd').reply(304, '')
  await t.rejects(client.get('/odd', BODY), new UpstreamFailure('Upstream responded 304: status 304', 304))
})

t.test('an upstream message that echoes the token is redacted', async (t) => {
  const client = await openClient(t, { FORGE_TOKEN: TOKEN })
  nock(API).get('/echo').reply(401, { message: `Bad credentials: ${TOKEN}` })
  const error = (await client.get('/echo', BODY).catch((caught: unknown) => caught)) as Error
  t.equal(error.message, 'Upstream responded 401: Bad credentials: [redacted]')
})

t.test('long upstream messages are shortened to 200 characters', async (t) => {
  const client = await openClient(t)
  nock(API).get('/verbose').reply(500, { message: 'x'.repeat(1000) })
  const error = (await client.get('/verbose', BODY).catch((caught: unknown) => caught)) as Error
  t.equal(error.message, `Upstream responded 500: ${'x'.repeat(200)}`)
})

t.test('a transport error without a code is described by its message', async (t) => {
  const client = await openClient(t)
  // Retried like any failure without a status, so it must happen three times.
  nock(API).get('/odd-failure').times(3).replyWithError('socket went away')
  await t.rejects(client.get('/odd-failure', BODY), new UpstreamFailure('Upstream request failed: socket went away'))
})

t.test('a JSON body that is not an object or a list is an unexpected body', async (t) => {
  const client = await openClient(t)
  nock(API).get('/null').reply(200, 'null', { 'content-type': 'application/json' })
  await t.rejects(client.get('/null', BODY), { name: 'UpstreamFailure', message: /^Upstream sent an unexpected body/ })
})

t.test('after a rate limit no call is made to that resource until the wait is over; a spent search leaves core calls alone', async (t) => {
  const clock = testClock()
  const client = await openClient(t, {}, clock)
  const unexpected = recordUnexpectedCalls(t)
  nock(API).get('/search/issues').query(true).reply(429, { message: 'slow down' }, { 'retry-after': '30', 'x-ratelimit-resource': 'search' })
  nock(API).get('/users/a').reply(200, { login: 'a' }, { 'x-ratelimit-resource': 'core', 'x-ratelimit-remaining': '9' })
  await t.rejects(client.get('/search/issues', BODY, { q: 'x' }), { name: 'UpstreamRateLimited', status: 429 })
  await t.rejects(client.get('/search/issues', BODY, { q: 'y' }), { name: 'BudgetSpent', retryAfterSeconds: 30 })
  t.same(await client.get('/users/a', BODY), { login: 'a' })
  clock.advance(30_001)
  nock(API).get('/search/issues').query(true).reply(200, { total_count: 1 })
  t.same(await client.get('/search/issues', BODY, { q: 'y' }), { total_count: 1 })
  t.same(unexpected, [])
})

t.test('a spent core stops searches too: no answer of this service can succeed without core', async (t) => {
  const client = await openClient(t)
  const unexpected = recordUnexpectedCalls(t)
  nock(API).get('/users/a').reply(429, { message: 'slow down' }, { 'retry-after': '30', 'x-ratelimit-resource': 'core' })
  await t.rejects(client.get('/users/a', BODY), { name: 'UpstreamRateLimited', status: 429 })
  await t.rejects(client.get('/search/issues', BODY, { q: 'x' }), { name: 'BudgetSpent', retryAfterSeconds: 30 })
  t.same(unexpected, [])
})

t.test('a 304 feeds the budget: remaining 0 on a 304 stops the next call', async (t) => {
  const clock = testClock()
  const client = await openClient(t, {}, clock)
  nock(API).get('/users/a').reply(200, { login: 'a' }, { etag: '"v1"' })
  await client.get('/users/a', BODY)
  const spent = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(clock.now() / 1000 + 120), 'x-ratelimit-limit': '60' }
  nock(API, { reqheaders: { 'if-none-match': '"v1"' } }).get('/users/a').reply(304, '', spent)
  t.same(await client.get('/users/a', BODY), { login: 'a' }, 'the held body')
  const unexpected = recordUnexpectedCalls(t)
  await t.rejects(client.get('/users/b', BODY), { name: 'BudgetSpent', retryAfterSeconds: 120 })
  t.same(unexpected, [])
})

t.test('a call that revalidates is refused below the reserve; a call for something new is made', async (t) => {
  const clock = testClock()
  const client = await openClient(t, { FORGE_BUDGET_RESERVE: 0.1 }, clock)
  const low = { 'x-ratelimit-remaining': '400', 'x-ratelimit-reset': String(clock.now() / 1000 + 600), 'x-ratelimit-limit': '5000' }
  nock(API).get('/users/a').reply(200, { login: 'a' }, low)
  await client.get('/users/a', BODY)
  const log = pino({ level: 'silent' })
  await t.rejects(client.get('/users/a', BODY, undefined, { log, revalidates: true }), { name: 'BudgetSpent', retryAfterSeconds: 600 })
  nock(API).get('/users/b').reply(200, { login: 'b' }, low)
  t.same(await client.get('/users/b', BODY, undefined, { log, revalidates: false }), { login: 'b' })
})

t.test('a spent resource (X-RateLimit-Remaining: 0) is not called again before X-RateLimit-Reset', async (t) => {
  const clock = testClock()
  const client = await openClient(t, {}, clock)
  const reset = String(clock.now() / 1000 + 100)
  nock(API).get('/users/a').reply(200, { login: 'a' }, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-limit': '60' })
  await client.get('/users/a', BODY)
  await t.rejects(client.get('/users/b', BODY), { name: 'BudgetSpent', retryAfterSeconds: 100 })
  clock.advance(100_001)
  nock(API).get('/users/b').reply(200, { login: 'b' })
  t.same(await client.get('/users/b', BODY), { login: 'b' })
})

t.test('a plain 403 with quota left does not stop later calls', async (t) => {
  const client = await openClient(t)
  nock(API).get('/repos/a/b').reply(403, { message: 'Resource not accessible' }, { 'x-ratelimit-remaining': '4000', 'x-ratelimit-limit': '5000' })
  nock(API).get('/users/a').reply(200, { login: 'a' })
  await t.rejects(client.get('/repos/a/b', BODY), UpstreamRateLimited)
  t.same(await client.get('/users/a', BODY), { login: 'a' })
})
