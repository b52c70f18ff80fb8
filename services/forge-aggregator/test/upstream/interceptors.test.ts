import t, { type Test } from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { UpstreamFailure } from '../../src/upstream/errors.ts'
import { buildAggregator, testClock, type TestClock, type TestEnv } from '../helpers/build.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { API, recordUnexpectedCalls } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

/**
 * Any JSON object or list, every field kept: what these tests ask of a body (the service's own
 * schemas are tested through the app; projections in test/upstream/projection.test.ts).
 */
const BODY = TypeCompiler.Compile(Type.Union([Type.Object({}, { additionalProperties: Type.Unknown() }), Type.Array(Type.Unknown())]))

/**
 * Retries, deduplication and the deadline, as the client's dispatcher composes them
 * (`upstreamInterceptors`), seen through the client as the app builds it.
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

