import t, { type Test } from 'tap'
import nock from 'nock'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { transportFailure, UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from '../../src/upstream/errors.ts'
import { buildAggregator, testClock, type TestClock, type TestEnv } from '../helpers/build.ts'
import { API, recordUnexpectedCalls } from '../helpers/upstream.ts'

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
 * How each upstream failure is told apart and described (`statusFailure`, `transportFailure`,
 * `retryAfterSeconds`), seen through the client as the app builds it.
 */

/**
 * The client as the app builds it and holds it (`app.forge.client`): its budget, interceptors
 * and held bodies wired by the forge plugin from the configuration, upstream at nock's API
 * unless `env` says otherwise, no budget reserve, on `clock` (one of its own unless given).
 */
async function openClient(t: Test, env: TestEnv = {}, clock: TestClock = testClock()) {
  const { app } = await buildAggregator(t, { env: { FORGE_BUDGET_RESERVE: 0, FORGE_TIMEOUT_MS: 2_000, ...env }, clock })
  return app.forge.client
}

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


t.test('a programming error of ours is thrown as it is, not taken for the upstream failing', async (t) => {
  const bug = new TypeError('cannot read properties of undefined')
  t.equal(t.throws(() => transportFailure(bug, false, 1_000, (message) => message)), bug)
})
