import t from 'tap'
import fp from 'fastify-plugin'
import { setTimeout as sleep } from 'node:timers/promises'
import { securityHeadersOnce } from '../../src/http/security-headers.ts'
import { buildService } from '../helpers/service.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, { schema: unknown }>; content?: Record<string, unknown> }> }>>
}

t.test('a well-formed X-Request-Id is reused, sent back, and is the reqId of every line of the request', async (t) => {
  const { app, lines } = await buildService(t)
  const res = await app.inject({ url: '/things/1', headers: { 'x-request-id': 'edge-01:a.b_c-d' } })
  t.equal(res.headers['x-request-id'], 'edge-01:a.b_c-d')
  const ofRequest = lines.filter((line) => line.reqId === 'edge-01:a.b_c-d').map((line) => line.msg)
  t.same(ofRequest, ['handling', 'request completed'])
})

t.test('a missing or malformed X-Request-Id is replaced by a new UUID', async (t) => {
  const { app } = await buildService(t)
  const ids = []
  for (const given of [undefined, '', 'a'.repeat(129), 'has space', 'new\u00e9', 'x;y']) {
    const res = await app.inject({ url: '/things/1', headers: given === undefined ? {} : { 'x-request-id': given } })
    t.match(res.headers['x-request-id'], UUID, JSON.stringify(given))
    ids.push(res.headers['x-request-id'])
  }
  t.equal(new Set(ids).size, ids.length, 'each request gets its own')
  const longest = 'a'.repeat(128)
  t.equal((await app.inject({ url: '/things/1', headers: { 'x-request-id': longest } })).headers['x-request-id'], longest)
})

t.test('errors and unknown routes carry the request id too', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject({ url: '/nowhere', headers: { 'x-request-id': 'lost-1' } })
  t.equal(res.statusCode, 404)
  t.equal(res.headers['x-request-id'], 'lost-1')
})

t.test('security headers are on every answer, with a policy that does not upgrade requests to HTTPS', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject({ url: '/things/1' })
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.equal(res.headers['x-frame-options'], 'SAMEORIGIN')
  const policy = String(res.headers['content-security-policy'])
  t.match(policy, "default-src 'self'")
  t.match(policy, "script-src 'self'")
  t.notMatch(policy, 'upgrade-insecure-requests')
})

t.test('security headers are on answers no route gave too: a 404, a body that does not parse, a 429', async (t) => {
  const { app } = await buildService(t, { rateLimit: { perMinute: 4 } })
  const expected = securityHeadersOnce()
  t.ok(Object.keys(expected).length >= 10, 'helmet’s whole set')
  const answers = {
    'a route': await app.inject({ url: '/things/1' }),
    'no route': await app.inject({ url: '/nowhere' }),
    'a body that does not parse': await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"a":' }),
    'a body of a type no parser takes': await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'text/csv' }, payload: 'a,b' }),
  }
  // The limit is 4 a minute: the four requests above were counted, and this one is over it.
  const limited = await app.inject({ url: '/things/2' })
  t.same(
    [...Object.values(answers), limited].map((res) => res.statusCode),
    [200, 404, 400, 415, 429],
  )
  for (const [what, res] of Object.entries({ ...answers, 'over the rate limit': limited })) {
    t.match(res.headers, expected, what)
  }
})

t.test('CORS, when origins are set, lets a browser read the kit’s headers and those the service names', async (t) => {
  const { app } = await buildService(t, { corsOrigins: ['https://app.example'], exposedHeaders: ['ETag', 'Link'] })
  const res = await app.inject({ url: '/things/1', headers: { origin: 'https://app.example' } })
  t.equal(res.headers['access-control-allow-origin'], 'https://app.example')
  t.equal(res.headers['access-control-expose-headers'], 'X-Request-Id, Retry-After, ETag, Link')
  const bare = await buildService(t, { corsOrigins: ['https://app.example'] })
  const none = await bare.app.inject({ url: '/things/1', headers: { origin: 'https://app.example' } })
  t.equal(none.headers['access-control-expose-headers'], 'X-Request-Id, Retry-After', 'a service that names none: the kit’s alone')

  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/things/1',
    headers: { origin: 'https://app.example', 'access-control-request-method': 'DELETE' },
  })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.headers['access-control-allow-methods'], 'GET, DELETE')
})

t.test('CORS_ORIGINS=* allows any origin; unset, no CORS header is sent', async (t) => {
  const open = await buildService(t, { corsOrigins: ['*'] })
  t.equal((await open.app.inject({ url: '/things/1', headers: { origin: 'https://any.example' } })).headers['access-control-allow-origin'], '*')
  const closed = await buildService(t)
  t.notOk((await closed.app.inject({ url: '/things/1', headers: { origin: 'https://any.example' } })).headers['access-control-allow-origin'])
})

t.test('/metrics serves the default metrics and the request histogram by route pattern, and is not access-logged', async (t) => {
  const { app, lines } = await buildService(t)
  await app.inject({ url: '/things/1' })
  await app.inject({ url: '/things/2' })
  await app.inject({ url: '/nowhere/at/all' })
  // Another route, same method and status; one route, another method; one route, two statuses: each its own series.
  await app.inject({ url: '/scarce' })
  await app.inject({ method: 'HEAD', url: '/things/3' })
  await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"a":1}' })
  await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"a":' })
  const res = await app.inject({ url: '/metrics' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.match(res.body, /^process_cpu_user_seconds_total \d/m)
  t.match(res.body, /^nodejs_eventloop_lag_seconds \d/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="GET",route="\/things\/:id",status_code="200"\} 2$/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="GET",route="unmatched",status_code="404"\} 1$/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="GET",route="\/scarce",status_code="200"\} 1$/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="HEAD",route="\/things\/:id",status_code="200"\} 1$/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="POST",route="\/echo",status_code="200"\} 1$/m)
  t.match(res.body, /^http_request_duration_seconds_count\{method="POST",route="\/echo",status_code="400"\} 1$/m)
  t.notMatch(res.body, '/things/1', 'never a raw URL')
  t.notOk(lines.some((line) => line.url === '/metrics'), 'no access line for /metrics')
})

t.test('http_request_duration_seconds is in seconds, in buckets from 5 ms to 10 s: an answer that took 200 ms is above 0.1', async (t) => {
  const { app } = await buildService(t)
  app.get('/takes-200-ms', async () => {
    await sleep(200)
    return { ok: true }
  })
  await app.inject({ url: '/takes-200-ms' })
  const page = (await app.inject({ url: '/metrics' })).body
  const series = 'method="GET",route="/takes-200-ms",status_code="200"'
  const bucket = (le: string) => Number(new RegExp(`^http_request_duration_seconds_bucket\\{le="${le}",${series}\\} (\\S+)$`, 'm').exec(page)?.[1])
  const buckets = [...page.matchAll(new RegExp(`^http_request_duration_seconds_bucket\\{le="([^"]+)",${series}\\} `, 'gm'))].map(([, le]) => le)
  t.same(buckets, ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf'])
  // In milliseconds it would be past every bucket; in microseconds, in none of them.
  t.equal(bucket('0.1'), 0, 'not under 0.1 s')
  t.equal(bucket('2.5'), 1, 'under 2.5 s, the margin a loaded machine needs')
  const sum = Number(new RegExp(`^http_request_duration_seconds_sum\\{${series}\\} (\\S+)$`, 'm').exec(page)?.[1])
  t.ok(sum >= 0.2 && sum < 2.5, `200 ms is 0.2 s (${sum})`)
})

t.test('each app has its own registry: two apps in one process do not mix their counts', async (t) => {
  const first = await buildService(t)
  const second = await buildService(t)
  await first.app.inject({ url: '/things/1' })
  t.notMatch((await second.app.inject({ url: '/metrics' })).body, 'route="/things/:id"')
})

t.test('the OpenAPI document declares X-Request-Id on every answer, and /metrics', async (t) => {
  const { app } = await buildService(t)
  const document = (await app.inject({ url: '/docs/json' })).json<OpenApiDocument>()
  const thing = document.paths['/things/{id}']?.get?.responses['200']
  t.same(thing?.headers?.['X-Request-Id']?.schema, { type: 'string' })
  const metrics = document.paths['/metrics']?.get?.responses['200']
  t.same(metrics?.content, { 'text/plain; version=0.0.4; charset=utf-8': { schema: { type: 'string' } } }, 'declared as Prometheus text')
  t.ok(metrics?.headers?.['X-Request-Id'])
})

t.test("the OpenAPI document's info is the service's title, version and description", async (t) => {
  const { app } = await buildService(t)
  const document = (await app.inject({ url: '/docs/json' })).json<{ openapi: string; info: unknown }>()
  t.match(document.openapi, /^3\./)
  t.same(document.info, { title: 'kit', version: '1.0.0', description: 'a test service' })
})

t.test("the shared set-up is a set of named plugins: a service's own plugin can declare the ones it needs", async (t) => {
  const { app } = await buildService(t)
  const names = ['service-kit', 'request-id', 'security-headers', 'host-header', 'cors', 'rate-limit', 'json-body', 'openapi', 'metrics', 'drain']
  await app.register(fp(async () => {}, { name: 'needs-all', dependencies: names }))
  await t.resolves(async () => {
    await app.ready()
  })
})

t.test('values are never coerced: a number is not a string, and a repeated query parameter is not one value', async (t) => {
  const { app } = await buildService(t)
  const name = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
  app.post('/named', { schema: { body: name } }, async (request) => request.body)
  app.get('/named', { schema: { querystring: name } }, async (request) => request.query)

  const numeric = await app.inject({ method: 'POST', url: '/named', payload: { name: 123 } })
  t.equal(numeric.statusCode, 400)
  t.same(numeric.json(), { detail: 'body/name must be string' })
  const repeated = await app.inject({ url: '/named?name=1&name=2' })
  t.equal(repeated.statusCode, 400)
  t.same(repeated.json(), { detail: 'querystring/name must be string' })
  t.same((await app.inject({ method: 'POST', url: '/named', payload: { name: '123' } })).json(), { name: '123' })
})

t.test('a URL the router cannot decode is answered 400 in the service shape', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject({ url: '/things/%E0%A4%A' })
  t.equal(res.statusCode, 400)
  t.match(res.json(), { detail: /./ })
  t.same(Object.keys(res.json()), ['detail'])
  t.equal(res.headers['cache-control'], 'no-store')
})

t.test('the server gives a request 30 s to arrive', async (t) => {
  const { app } = await buildService(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.equal(app.server.requestTimeout, 30_000)
})

t.test('TRUST_PROXY unset: the client address is the socket, whatever X-Forwarded-For says', async (t) => {
  const { app, lines } = await buildService(t)
  await app.inject({ url: '/things/1', headers: { 'x-forwarded-for': '203.0.113.9' } })
  t.equal(lines.find((line) => line.msg === 'request completed')?.remoteAddress, '127.0.0.1')
})

t.test('TRUST_PROXY believes X-Forwarded-For: all of it, a number of hops, or listed proxies only', async (t) => {
  const cases = [
    { trustProxy: 'true', expected: '198.51.100.1' },
    { trustProxy: 'false', expected: '127.0.0.1' },
    { trustProxy: '1', expected: '203.0.113.9' },
    { trustProxy: '10', expected: '198.51.100.1' },
    { trustProxy: '127.0.0.1, 203.0.113.0/24', expected: '198.51.100.1' },
    { trustProxy: '10.0.0.0/8', expected: '127.0.0.1' },
  ]
  for (const { trustProxy, expected } of cases) {
    const { app, lines } = await buildService(t, { trustProxy })
    await app.inject({ url: '/things/1', headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.9' } })
    t.equal(lines.find((line) => line.msg === 'request completed')?.remoteAddress, expected, `TRUST_PROXY=${trustProxy}`)
  }
})
