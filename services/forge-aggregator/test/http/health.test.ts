import t from 'tap'
import type { LogLine } from '@repo/test-support'
import { buildAggregator } from '../helpers/build.ts'
import { recordUnexpectedCalls } from '../helpers/upstream.ts'

t.test('/health and /ready answer 200 and never call the upstream', async (t) => {
  const { app } = await buildAggregator(t)
  const unexpected = recordUnexpectedCalls(t)
  const health = await app.inject({ method: 'GET', url: '/health' })
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  t.equal(health.statusCode, 200)
  t.same(health.json(), { status: 'ok' })
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ready' })
  t.same(unexpected, [])
})

t.test('/ready answers 503 {"error":"Shutting down"} once the process drains, while /health still answers', async (t) => {
  const { app } = await buildAggregator(t)
  app.startDraining()
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  t.equal(ready.statusCode, 503)
  t.same(ready.json(), { error: 'Shutting down' })
  const health = await app.inject({ method: 'GET', url: '/health' })
  t.equal(health.statusCode, 200)
  t.equal(health.headers.connection, 'close')
  const document = (await app.inject({ method: 'GET', url: '/docs/json' })).json<{ paths: Record<string, { get: { responses: Record<string, unknown> } }> }>()
  t.same(Object.keys(document.paths['/ready']?.get.responses ?? {}).sort(), ['200', '503'], 'the OpenAPI document says so')
})

t.test('/health and /ready are not access-logged, even at trace level: probes every few seconds would bury the other lines', async (t) => {
  const { app, logs } = await buildAggregator(t)
  for (const url of ['/health', '/ready', '/health']) t.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url)
  await app.inject({ method: 'GET', url: '/api/forge/nothing' })
  // The access line names the URL itself; the debug line before it, under `req`.
  const urlOf = (line: LogLine) => line.url ?? (line.req as { url?: unknown } | undefined)?.url
  t.same(
    logs.lines.filter((line) => urlOf(line) !== undefined).map((line) => [line.msg, urlOf(line)]),
    [
      ['incoming request', '/api/forge/nothing'],
      ['request completed', '/api/forge/nothing'],
    ],
    'only the other request has its lines',
  )
})

t.test('an unknown route answers 404 {"error":"Not Found"}', async (t) => {
  const { app } = await buildAggregator(t)
  const res = await app.inject({ method: 'GET', url: '/api/forge/nothing' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { error: 'Not Found' })
})

t.test('/docs serves the Swagger UI and /docs/json the OpenAPI document of both endpoints', async (t) => {
  const { app } = await buildAggregator(t)
  const ui = await app.inject({ method: 'GET', url: '/docs/' })
  t.equal(ui.statusCode, 200)
  t.match(ui.headers['content-type'], /text\/html/)

  const document = (await app.inject({ method: 'GET', url: '/docs/json' })).json<{
    paths: Record<string, { get: { parameters: { name: string; schema: { pattern?: string } }[]; responses: Record<string, unknown> } }>
  }>()
  const users = document.paths['/api/forge/users']?.get
  const repos = document.paths['/api/forge/repos']?.get
  t.same(Object.keys(users?.responses ?? {}).sort(), ['200', '304', '400', '403', '404', '500'])
  t.same(Object.keys(repos?.responses ?? {}).sort(), ['200', '304', '400', '403', '404', '500'])
  t.match(users?.parameters, [{ name: 'user_name', schema: { pattern: '^[A-Za-z0-9-]{1,39}$' } }])
  t.match(repos?.parameters, [{ name: 'repo_name' }])
  t.match(JSON.stringify(users?.responses['200']), /"totalStars"/)
  t.match(JSON.stringify(repos?.responses['200']), /"forksCount".*"totalCount"/)
})

t.test('CORS_ORIGINS allows the listed origins for GET', async (t) => {
  const { app } = await buildAggregator(t, { env: { CORS_ORIGINS: ['https://app.example'] } })
  const allowed = await app.inject({ method: 'GET', url: '/health', headers: { origin: 'https://app.example' } })
  const other = await app.inject({ method: 'GET', url: '/health', headers: { origin: 'https://evil.example' } })
  t.equal(allowed.headers['access-control-allow-origin'], 'https://app.example')
  t.equal(other.headers['access-control-allow-origin'], undefined)
})

t.test('CORS_ORIGINS=* allows any origin; without it no CORS headers are sent', async (t) => {
  const open = await buildAggregator(t, { env: { CORS_ORIGINS: ['*'] } })
  const closed = await buildAggregator(t)
  const headers = { origin: 'https://anyone.example' }
  t.equal((await open.app.inject({ method: 'GET', url: '/health', headers })).headers['access-control-allow-origin'], '*')
  t.equal((await closed.app.inject({ method: 'GET', url: '/health', headers })).headers['access-control-allow-origin'], undefined)
})
