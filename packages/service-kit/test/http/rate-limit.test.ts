import t, { type Test } from 'tap'
import { createClient } from 'redis'
import type { RateLimitRedis } from '../../src/index.ts'
import { startPrivateRedis } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

async function buildLimited(t: Test, perMinute: number, options: { redis?: RateLimitRedis; trustProxy?: string } = {}) {
  const { app } = await buildService(t, { rateLimit: { perMinute, redis: options.redis }, ...(options.trustProxy ? { trustProxy: options.trustProxy } : {}) })
  return app
}

async function connect(t: Test, port: number) {
  const client = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: 50 }, disableOfflineQueue: true })
  client.on('error', () => {})
  await client.connect()
  t.teardown(() => client.destroy())
  return client
}

t.test('over RATE_LIMIT_PER_MINUTE a client gets 429 in the service error shape, with Retry-After', async (t) => {
  const app = await buildLimited(t, 2)
  t.equal((await app.inject({ url: '/things/1' })).statusCode, 200)
  t.equal((await app.inject({ url: '/things/1' })).statusCode, 200)
  const refused = await app.inject({ url: '/things/1' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { detail: 'Rate limit exceeded, retry in 1 minute' })
  t.equal(refused.headers['retry-after'], '60')
  t.match(refused.headers['x-request-id'], /./, 'still carries its request id')
})

t.test('probes and /metrics are never limited', async (t) => {
  const app = await buildLimited(t, 1)
  await app.inject({ url: '/things/1' })
  for (const url of ['/health', '/ready', '/metrics', '/health', '/ready', '/metrics']) {
    t.equal((await app.inject({ url })).statusCode, 200, url)
  }
})

t.test('RATE_LIMIT_PER_MINUTE=0 limits nothing', async (t) => {
  const app = await buildLimited(t, 0)
  for (let index = 0; index < 5; index++) t.equal((await app.inject({ url: '/things/1' })).statusCode, 200)
})

t.test('each client address has its own count; TRUST_PROXY decides what the address is', async (t) => {
  const behindProxy = await buildLimited(t, 1, { trustProxy: 'true' })
  const from = (address: string) => behindProxy.inject({ url: '/things/1', headers: { 'x-forwarded-for': address } })
  t.equal((await from('198.51.100.1')).statusCode, 200)
  t.equal((await from('198.51.100.2')).statusCode, 200)
  t.equal((await from('198.51.100.1')).statusCode, 429)

  const direct = await buildLimited(t, 1)
  const claim = (address: string) => direct.inject({ url: '/things/1', headers: { 'x-forwarded-for': address } })
  t.equal((await claim('198.51.100.1')).statusCode, 200)
  t.equal((await claim('198.51.100.2')).statusCode, 429, 'a client cannot escape by naming another address')
})

t.test('with Redis, replicas share one count per client', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const client = await connect(t, redis.port)
  const [first, second] = [await buildLimited(t, 3, { redis: client }), await buildLimited(t, 3, { redis: client })]

  const statuses = []
  for (const replica of [first, second, first, second]) statuses.push((await replica.inject({ url: '/things/1' })).statusCode)
  t.same(statuses, [200, 200, 200, 429])
  const ttl = await client.pTTL('rate-limit:kit:127.0.0.1')
  t.ok(ttl > 55_000 && ttl <= 60_000, `the window ends a minute after the first request (${ttl} ms left)`)

  t.equal((await first.inject({ url: '/scarce' })).statusCode, 200, 'a route with its own limit counts apart')
  t.equal((await second.inject({ url: '/scarce' })).statusCode, 429, 'and shares its count too')
})

t.test("with Redis, every count is kept under the service's name, a route's own limit included", async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const client = await connect(t, redis.port)
  const app = await buildLimited(t, 3, { redis: client })
  await app.inject({ url: '/things/1' })
  await app.inject({ url: '/scarce' })
  const keys = await client.keys('*')
  t.equal(keys.length, 2, `the route's own count apart: ${keys.join(', ')}`)
  t.ok(keys.every((key) => key.startsWith('rate-limit:kit:')), 'both under rate-limit:<service>:')
})

t.test('with Redis, the window is fixed by the first request: later requests never push its end back', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const client = await connect(t, redis.port)
  const app = await buildLimited(t, 5, { redis: client })
  await app.inject({ url: '/things/1' })
  // As if 55 of the window's 60 seconds had passed.
  await client.pExpire('rate-limit:kit:127.0.0.1', 5_000)
  await app.inject({ url: '/things/1' })
  const ttl = await client.pTTL('rate-limit:kit:127.0.0.1')
  t.ok(ttl > 0 && ttl <= 5_000, `the window still ends when the first request set it (${ttl} ms left)`)
  t.equal(await client.get('rate-limit:kit:127.0.0.1'), '2', 'and both requests are counted in it')
})

t.test('with Redis down or silent, requests are let through rather than refused or held', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const client = await connect(t, redis.port)
  const app = await buildLimited(t, 1, { redis: client })
  await app.inject({ url: '/things/1' })

  redis.pause()
  const started = performance.now()
  t.equal((await app.inject({ url: '/things/1' })).statusCode, 200, 'silent Redis: let through')
  t.ok(performance.now() - started < 1_000, 'without waiting for Redis')
  redis.resume()

  await redis.stop()
  t.equal((await app.inject({ url: '/things/1' })).statusCode, 200, 'Redis down: let through')
})

t.test('requests to unmatched routes count too, and are answered 429 past the limit', async (t) => {
  const app = await buildLimited(t, 2)
  t.equal((await app.inject({ url: '/nowhere' })).statusCode, 404)
  t.equal((await app.inject({ url: '/things/1' })).statusCode, 200)
  const refused = await app.inject({ url: '/nowhere/else' })
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { detail: 'Rate limit exceeded, retry in 1 minute' })
})
