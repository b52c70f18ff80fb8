import t from 'tap'
import { Registry } from 'prom-client'
import { pino } from 'pino'
import { buildWithRedis } from './helpers/build.ts'

t.test('every answer carries X-Request-Id: the caller’s when well-formed, else a new one', async (t) => {
  const { app } = await buildWithRedis(t)
  const given = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'a' }, headers: { 'x-request-id': 'req-42' } })
  t.equal(given.headers['x-request-id'], 'req-42')
  const invalid = await app.inject({ method: 'POST', url: '/items/', payload: {}, headers: { 'x-request-id': 'no spaces' } })
  t.equal(invalid.statusCode, 422)
  t.match(invalid.headers['x-request-id'], /^[0-9a-f-]{36}$/)
})

t.test('answers carry security headers', async (t) => {
  const { app } = await buildWithRedis(t)
  const res = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.match(res.headers['content-security-policy'], "default-src 'self'")
})

t.test('/metrics counts requests by route pattern in the registry the app was given', async (t) => {
  const metrics = new Registry()
  const { app } = await buildWithRedis(t, {}, { metrics })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'pear' } })
  await app.inject({ method: 'DELETE', url: '/items/pear' })
  await app.inject({ method: 'DELETE', url: '/items/pear' })

  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(page, /^http_request_duration_seconds_count\{method="POST",route="\/items\/",status_code="201"\} 1$/m)
  t.match(page, /^http_request_duration_seconds_count\{method="DELETE",route="\/items\/:item_name",status_code="200"\} 1$/m)
  t.match(page, /^http_request_duration_seconds_count\{method="DELETE",route="\/items\/:item_name",status_code="404"\} 1$/m)
  t.match(await metrics.metrics(), 'route="/items/:item_name"', 'the page is the given registry')
})

t.test('a store failure is logged with the reqId of the request it failed', async (t) => {
  const lines: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  const { app, redis } = await buildWithRedis(t, {}, { logger })
  await redis.stop()

  const res = await app.inject({ method: 'GET', url: '/items/', headers: { 'x-request-id': 'trace-503' } })
  t.equal(res.statusCode, 503)
  const failure = lines.find((line) => line.msg === 'request failed')
  t.match(failure, { reqId: 'trace-503', level: 40, error: { type: 'StoreUnavailableError', cause: { message: String } } })
})
