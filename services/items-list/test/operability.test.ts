import t from 'tap'
import { Registry } from 'prom-client'
import { pino } from 'pino'
import { buildApp } from '../src/app.ts'
import { buildWithRedis, waitUntilReady } from './helpers/build.ts'

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

t.test('/metrics shows the store: commands by outcome, their duration, and whether Redis is up', async (t) => {
  const { app, redis, store } = await buildWithRedis(t)
  const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body
  const sample = (page: string, series: string) => Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(page)?.[1])

  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'a' } })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'b' }, headers: { 'idempotency-key': 'k' } })
  await app.inject({ method: 'GET', url: '/items/' })
  await app.inject({ method: 'DELETE', url: '/items/a' })
  let page = await scrape()
  t.equal(sample(page, 'items_store_up'), 1)
  for (const command of ['rpush', 'append_once', 'lrange', 'lrem']) {
    t.equal(sample(page, `items_store_commands_total{command="${command}",outcome="ok"}`), 1, command)
    t.equal(sample(page, `items_store_command_duration_seconds_count{command="${command}"}`), 1, command)
  }
  t.equal(sample(page, 'items_store_commands_total{command="lrange",outcome="error"}'), 0, 'every series is there from the start')

  redis.pause()
  await app.inject({ method: 'GET', url: '/items/' })
  redis.resume()
  t.equal(sample(await scrape(), 'items_store_commands_total{command="lrange",outcome="timeout"}'), 1, 'a silent Redis is a timeout')

  await redis.stop()
  await app.inject({ method: 'GET', url: '/items/' })
  page = await scrape()
  t.equal(sample(page, 'items_store_up'), 0)
  t.equal(sample(page, 'items_store_commands_total{command="lrange",outcome="error"}'), 1, 'a Redis that is down is an error')

  await redis.start()
  await waitUntilReady(store)
  t.equal(sample(await scrape(), 'items_store_up'), 1, 'up again after the restart')
})

t.test('RATE_LIMIT_PER_MINUTE counts in Redis: replicas on one Redis share each client’s count', async (t) => {
  const first = await buildWithRedis(t, { RATE_LIMIT_PER_MINUTE: 2 })
  const replica = await buildApp({ RATE_LIMIT_PER_MINUTE: 2 }, { store: first.store, rateLimitRedis: first.store.redis })
  t.teardown(() => replica.close())

  t.equal((await first.app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  t.equal((await replica.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  const refused = await first.app.inject({ method: 'GET', url: '/items/' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { detail: 'Rate limit exceeded, retry in 1 minute' })
  t.equal(refused.headers['retry-after'], '60')
  t.equal(await first.inspector.get('rate-limit:items-list:127.0.0.1'), '3', 'counted under the service\'s own name, apart from other services on that Redis')
  t.equal((await first.app.inject({ method: 'GET', url: '/ready' })).statusCode, 200, 'probes are never limited')
})
