import t from 'tap'
import { buildAggregator } from './helpers/build.ts'

interface OpenApiResponse {
  headers?: Record<string, unknown>
}
interface OpenApiDocument {
  paths: Record<string, { get: { responses: Record<string, OpenApiResponse> } }>
}

t.test('the OpenAPI document declares the headers each answer carries', async (t) => {
  const { app } = await buildAggregator(t)
  const { paths } = (await app.inject({ url: '/docs/json' })).json<OpenApiDocument>()
  const headersOf = (path: string, status: string) => Object.keys(paths[path]?.get.responses[status]?.headers ?? {}).sort()

  t.same(headersOf('/api/forge/users', '200'), ['Age', 'Cache-Control', 'Cache-Status', 'ETag', 'X-Forge-Partial', 'X-Request-Id'])
  t.same(headersOf('/api/forge/repos', '200'), ['Age', 'Cache-Control', 'Cache-Status', 'ETag', 'X-Request-Id'])
  for (const path of ['/api/forge/users', '/api/forge/repos']) {
    t.same(headersOf(path, '304'), ['Cache-Control', 'ETag', 'X-Request-Id'], `${path} 304`)
    t.same(headersOf(path, '403'), ['Retry-After', 'X-Request-Id'], `${path} 403`)
    t.same(headersOf(path, '404'), ['X-Request-Id'], `${path} 404`)
  }
  t.ok(paths['/metrics'], '/metrics is declared')
})

t.test('answers carry X-Request-Id and security headers; /metrics counts them by route', async (t) => {
  const { app } = await buildAggregator(t)
  const res = await app.inject({ url: '/api/forge/users?user_name=not_valid!', headers: { 'x-request-id': 'agg-7' } })
  t.equal(res.statusCode, 400)
  t.equal(res.headers['x-request-id'], 'agg-7')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  const page = (await app.inject({ url: '/metrics' })).body
  t.match(page, /^http_request_duration_seconds_count\{method="GET",route="\/api\/forge\/users",status_code="400"\} 1$/m)
})

t.test('/metrics serves the app’s own metrics and the service-kit ones on one page', async (t) => {
  const { app } = await buildAggregator(t)
  await app.inject({ url: '/health' })
  const page = (await app.inject({ url: '/metrics' })).body
  t.match(page, 'route="/health"')
  t.match(page, /^forge_cache_results_total\{endpoint="users",result="hit"\} 0$/m)
  t.match(page, /^# TYPE forge_upstream_requests_total counter$/m)
  t.notMatch(page, 'forge_shared_store_up', 'no shared-store gauge without REDIS_URL')
})

t.test('RATE_LIMIT_PER_MINUTE answers 429 in the aggregator error shape', async (t) => {
  const { app } = await buildAggregator(t, { env: { RATE_LIMIT_PER_MINUTE: 1 } })
  await app.inject({ url: '/api/forge/users?user_name=bad!' })
  const refused = await app.inject({ url: '/api/forge/users?user_name=bad!' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { error: 'Rate limit exceeded, retry in 1 minute' })
  t.equal(refused.headers['retry-after'], '60')
})

t.test('TRUST_PROXY: X-Forwarded-For is believed from that address only, for the rate limit and the access line alike', async (t) => {
  const proxy = '10.0.0.1'
  const { app, logs } = await buildAggregator(t, { env: { TRUST_PROXY: proxy, RATE_LIMIT_PER_MINUTE: 1 } })
  // An invalid name: answered 400 at once, without an upstream call, and counted and logged as any request.
  let sent = 0
  const from = async (remoteAddress: string, forwardedFor: string) => {
    const requestId = `trust-proxy-${++sent}`
    const res = await app.inject({ url: '/api/forge/users?user_name=bad!', remoteAddress, headers: { 'x-forwarded-for': forwardedFor, 'x-request-id': requestId } })
    const line = logs.lines.find((entry) => entry.reqId === requestId && entry.msg === 'request completed')
    return { status: res.statusCode, loggedAs: line?.remoteAddress }
  }

  // Through the proxy, each client behind it is itself: its own address, its own allowance.
  t.same(await from(proxy, '203.0.113.1'), { status: 400, loggedAs: '203.0.113.1' })
  t.same(await from(proxy, '203.0.113.2'), { status: 400, loggedAs: '203.0.113.2' }, 'another client behind the proxy')
  t.same(await from(proxy, '203.0.113.1'), { status: 429, loggedAs: '203.0.113.1' }, 'the first client’s minute is spent')
  // From anywhere else, X-Forwarded-For is only what the client says about itself.
  t.same(await from('192.0.2.9', '203.0.113.3'), { status: 400, loggedAs: '192.0.2.9' })
  t.same(await from('192.0.2.9', '203.0.113.4'), { status: 429, loggedAs: '192.0.2.9' }, 'a new X-Forwarded-For buys no new allowance')
})
