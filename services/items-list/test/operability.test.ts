import t from 'tap'
import { buildService } from './helpers/service.ts'

t.test('every answer carries X-Request-Id: the caller’s when well-formed, else a new one', async (t) => {
  const { app } = await buildService(t)
  const given = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'a' }, headers: { 'x-request-id': 'req-42' } })
  t.equal(given.headers['x-request-id'], 'req-42')
  const invalid = await app.inject({ method: 'POST', url: '/items/', payload: {}, headers: { 'x-request-id': 'no spaces' } })
  t.equal(invalid.statusCode, 422)
  t.match(invalid.headers['x-request-id'], /^[0-9a-f-]{36}$/)
})

t.test('answers carry security headers', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.match(res.headers['content-security-policy'], "default-src 'self'")
})

t.test('/metrics counts requests by route pattern in the app’s own registry', async (t) => {
  const { app } = await buildService(t)
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'pear' } })
  await app.inject({ method: 'DELETE', url: '/items/pear' })
  await app.inject({ method: 'DELETE', url: '/items/pear' })

  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(page, /^http_request_duration_seconds_count\{method="POST",route="\/items\/",status_code="201"\} 1$/m)
  t.match(page, /^http_request_duration_seconds_count\{method="DELETE",route="\/items\/:item_name",status_code="200"\} 1$/m)
  t.match(page, /^http_request_duration_seconds_count\{method="DELETE",route="\/items\/:item_name",status_code="404"\} 1$/m)
  t.match(await app.metrics.metrics(), 'route="/items/:item_name"', 'the page is the app’s registry')
})

t.test('a store failure is logged with the reqId of the request it failed', async (t) => {
  const { app, redis, logs } = await buildService(t)
  await redis.stop()

  const res = await app.inject({ method: 'GET', url: '/items/', headers: { 'x-request-id': 'trace-503' } })
  t.equal(res.statusCode, 503)
  const failure = await logs.waitFor((line) => line.msg === 'request failed')
  t.match(failure, { reqId: 'trace-503', level: 40, err: { type: 'RedisUnavailableError', message: String } })
  t.notOk((failure.err as { stack?: string }).stack, 'without a stack')
})

t.test('/metrics shows the store: commands by outcome, their duration, and whether Redis is up', async (t) => {
  const { app, redis, untilReady } = await buildService(t)
  const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body
  const sample = (page: string, series: string) => Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(page)?.[1])

  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'a' } })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'b' }, headers: { 'idempotency-key': 'k' } })
  await app.inject({ method: 'GET', url: '/items/' })
  await app.inject({ method: 'DELETE', url: '/items/a' })
  let page = await scrape()
  t.equal(sample(page, 'items_store_up'), 1)
  // A list of one chunk: one step reads it, one deletes from it.
  for (const command of ['append', 'append_once', 'read', 'remove_step']) {
    t.equal(sample(page, `items_store_commands_total{command="${command}",outcome="ok"}`), 1, command)
    t.equal(sample(page, `items_store_command_duration_seconds_count{command="${command}"}`), 1, command)
  }
  t.equal(sample(page, 'items_store_commands_total{command="read",outcome="error"}'), 0, 'every series is there from the start')
  t.equal(sample(page, 'items_store_command_duration_seconds_bucket{le="0.0001",command="read"}'), 0, 'buckets from 100 µs, below any Redis round trip')
  t.equal(sample(page, 'items_store_command_duration_seconds_bucket{le="0.5",command="read"}'), 1, 'up to the deadline')

  // Counted between scrapes: each scrape adds only what happened since the one before. Two
  // reads finding the list unchanged, the next GET checks it instead (docs/list.md, "The held list").
  await app.inject({ method: 'GET', url: '/items/' })
  await app.inject({ method: 'GET', url: '/items/' })
  t.equal(sample(await scrape(), 'items_store_commands_total{command="read",outcome="ok"}'), 3)
  await app.inject({ method: 'GET', url: '/items/' })
  page = await scrape()
  t.equal(sample(page, 'items_store_commands_total{command="read",outcome="ok"}'), 3)
  t.equal(sample(page, 'items_store_commands_total{command="held_list",outcome="ok"}'), 1)

  redis.pause()
  await app.inject({ method: 'GET', url: '/items/' })
  redis.resume()
  t.equal(sample(await scrape(), 'items_store_commands_total{command="held_list",outcome="timeout"}'), 1, 'a silent Redis is a timeout')

  await redis.stop()
  await app.inject({ method: 'GET', url: '/items/' })
  page = await scrape()
  t.equal(sample(page, 'items_store_up'), 0)
  t.equal(sample(page, 'items_store_commands_total{command="held_list",outcome="error"}'), 1, 'a Redis that is down is an error')

  await redis.start()
  await untilReady()
  t.equal(sample(await scrape(), 'items_store_up'), 1, 'up again after the restart')
})

t.test('RATE_LIMIT_PER_MINUTE counts in Redis: replicas on one Redis share each client’s count', async (t) => {
  const env = { RATE_LIMIT_PER_MINUTE: '2' }
  const first = await buildService(t, { env })
  const replica = await buildService(t, { env, redis: first.redis })

  t.equal((await first.app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  t.equal(await first.inspector.get('rate-limit:items-list:127.0.0.1'), '1', 'the count is in Redis, under the service’s own name')
  t.equal((await replica.app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  t.equal(await first.inspector.get('rate-limit:items-list:127.0.0.1'), '2', 'the replica counts on the same key')
  const refused = await first.app.inject({ method: 'GET', url: '/items/' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { detail: 'Rate limit exceeded, retry in 1 minute' })
  t.equal(refused.headers['retry-after'], '60')
  t.equal((await replica.app.inject({ method: 'GET', url: '/items/' })).statusCode, 429, 'the replica refuses too')
  t.equal((await first.app.inject({ method: 'GET', url: '/ready' })).statusCode, 200, 'probes are never limited')
  t.equal((await first.app.inject({ method: 'GET', url: '/health' })).statusCode, 200)
  t.equal((await first.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 200)
})

t.test('the rate limit’s window is fixed by a client’s first request: later requests do not push its end back', async (t) => {
  const { app, inspector } = await buildService(t, { env: { RATE_LIMIT_PER_MINUTE: '2' } })
  const key = 'rate-limit:items-list:127.0.0.1'

  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  const windowMs = await inspector.pTTL(key)
  t.ok(windowMs > 55_000 && windowMs <= 60_000, `the first request opens a one-minute window (${windowMs} ms left)`)
  // As if 40 s of the window had passed, without waiting for them.
  await inspector.pExpire(key, 20_000)

  const second = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(second.statusCode, 200)
  const leftMs = await inspector.pTTL(key)
  t.ok(leftMs > 0 && leftMs <= 20_000, `a later request leaves the window's end where it was (${leftMs} ms left)`)
  t.ok(Number(second.headers['x-ratelimit-reset']) <= 20, `X-RateLimit-Reset ${String(second.headers['x-ratelimit-reset'])}`)

  const refused = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(refused.statusCode, 429)
  const retryAfter = Number(refused.headers['retry-after'])
  t.ok(retryAfter > 0 && retryAfter <= 20, `Retry-After ${retryAfter} s: the end of the first request's window`)
  t.ok((await inspector.pTTL(key)) <= 20_000, 'nor does a refused one')
})

t.test('TRUST_PROXY decides the client address the rate limit counts and the access line shows', async (t) => {
  const behindProxy = await buildService(t, { env: { RATE_LIMIT_PER_MINUTE: '5', TRUST_PROXY: '127.0.0.1' } })
  const direct = await buildService(t, { env: { RATE_LIMIT_PER_MINUTE: '5' } })
  const headers = { 'x-forwarded-for': '203.0.113.7', 'x-request-id': 'forwarded' }

  await behindProxy.app.inject({ method: 'GET', url: '/items/', headers })
  t.equal(await behindProxy.inspector.get('rate-limit:items-list:203.0.113.7'), '1', 'the trusted proxy’s client is counted')
  const line = await behindProxy.logs.waitFor((entry) => entry.reqId === 'forwarded' && entry.msg === 'request completed')
  t.equal(line.remoteAddress, '203.0.113.7')

  await direct.app.inject({ method: 'GET', url: '/items/', headers })
  t.equal(await direct.inspector.get('rate-limit:items-list:127.0.0.1'), '1', 'unset, X-Forwarded-For is not believed')
  t.equal(await direct.inspector.get('rate-limit:items-list:203.0.113.7'), null)
})

// Unmatched routes are rate limited too: otherwise, past the limit, a client could still send (and
// have logged) any number of requests to paths that do not exist.
t.test('RATE_LIMIT_PER_MINUTE covers unmatched routes: they count against the client’s limit on /items/ and get 429 past it', async (t) => {
  const { app, inspector } = await buildService(t, { env: { RATE_LIMIT_PER_MINUTE: '3' } })
  const key = 'rate-limit:items-list:127.0.0.1'

  t.equal((await app.inject({ method: 'GET', url: '/nowhere' })).statusCode, 404)
  t.equal((await app.inject({ method: 'POST', url: '/items/x/y', payload: { name: 'a' } })).statusCode, 404)
  t.equal(await inspector.get(key), '2', 'both unmatched requests are counted, on the client’s one key')
  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 200, 'the third request, on /items/, is still within the limit')

  const onItems = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(onItems.statusCode, 429, '/items/ is refused: the 404s used up the allowance')
  const unmatched = await app.inject({ method: 'GET', url: '/nowhere' })
  t.equal(unmatched.statusCode, 429, 'and so is an unmatched route, instead of another 404')
  t.same(unmatched.json(), { detail: 'Rate limit exceeded, retry in 1 minute' })
  t.equal(unmatched.headers['retry-after'], '60')
  t.match(unmatched.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  for (const url of ['/health', '/ready', '/metrics']) t.equal((await app.inject({ method: 'GET', url })).statusCode, 200, `${url} is never limited`)
})
