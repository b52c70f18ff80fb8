import t, { type Test } from 'tap'
import nock from 'nock'
import { pino } from 'pino'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { UpstreamFailure, UpstreamRateLimited } from '../../src/upstream/errors.ts'
import { buildAggregator, testClock, type TestClock, type TestEnv } from '../helpers/build.ts'
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
