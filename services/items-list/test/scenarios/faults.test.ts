import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { createPrivateRedis, eventually } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

const FAIL_FAST_MS = 1_000
const STORE_UNAVAILABLE = { detail: 'Item store unavailable' }
/** How often `timedInject` looks at the clock to see how late its timer came. */
const SAMPLE_MS = 5

/**
 * A request, and how long the service kept it: the time to its answer, less the time this process
 * (the service's and the test's) was kept from running, which a 5 ms timer's lateness adds up. On
 * a machine whose cores other jobs hold, the process waits for one; that is the machine's time,
 * not the service's, and a service that waits on a dead Redis waits with the process running.
 */
async function timedInject(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) {
  let stalledMs = 0
  let tick = performance.now()
  const sampler = setInterval(() => {
    const now = performance.now()
    stalledMs += Math.max(0, now - tick - SAMPLE_MS)
    tick = now
  }, SAMPLE_MS)
  const started = performance.now()
  try {
    const res = await app.inject({ method, url, ...(payload ? { payload } : {}) })
    const waitedMs = performance.now() - started
    return { res, elapsedMs: waitedMs - Math.min(stalledMs, waitedMs) }
  } finally {
    clearInterval(sampler)
  }
}

/** Waits until `condition` holds, polling; fails the test after about 10 s instead of hanging. */
async function until(condition: () => boolean, what: string): Promise<void> {
  if (!(await eventually(async () => condition(), 1_000, 10))) throw new Error(`never happened: ${what}`)
}

/** Between two writes of one client, so that a few hundred of them span a Redis restart. */
const WRITE_INTERVAL_MS = 2

t.test('Redis down: item routes answer 503 within 1 s, /ready 503; back up: served again without a restart', async (t) => {
  const { app, redis, storedItems, untilReady } = await buildService(t, { durable: true })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'before' } })
  await redis.stop()

  const attempts = [
    await timedInject(app, 'POST', '/items/', { name: 'during' }),
    await timedInject(app, 'GET', '/items/'),
    await timedInject(app, 'DELETE', '/items/before'),
  ]
  for (const { res, elapsedMs } of attempts) {
    t.equal(res.statusCode, 503)
    t.same(res.json(), STORE_UNAVAILABLE)
    t.ok(elapsedMs < FAIL_FAST_MS, `answered in ${Math.round(elapsedMs)} ms of the service's`)
  }
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 503, '/ready answers 503')
  t.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200, '/health still answers 200')

  await redis.start()
  await untilReady()
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'after' } })).statusCode, 201)
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  t.same(await storedItems(), ['before', 'after'], 'the acknowledged write survived the crash')
})

t.test('every name that got a 201 across a Redis crash and restart is in Redis', async (t) => {
  const { app, redis, storedItems } = await buildService(t, { durable: true })
  const acknowledged: string[] = []
  const statuses = new Set<number>()
  let slowest = 0

  let writing = true
  const writer = (async () => {
    for (let index = 0; writing; index++) {
      const name = `write-${index}`
      const { res, elapsedMs } = await timedInject(app, 'POST', '/items/', { name })
      statuses.add(res.statusCode)
      slowest = Math.max(slowest, elapsedMs)
      if (res.statusCode === 201) acknowledged.push(name)
      await sleep(WRITE_INTERVAL_MS)
    }
  })()
  await until(() => acknowledged.length >= 50, 'writes acknowledged before the crash')
  await redis.stop()
  await until(() => statuses.has(503), 'a write refused while Redis is down')
  await redis.start()
  const beforeRestart = acknowledged.length
  await until(() => acknowledged.length >= beforeRestart + 50, 'writes acknowledged after the restart')
  writing = false
  await writer

  t.same([...statuses].sort(), [201, 503], 'writes succeeded before and after, and failed cleanly during')
  t.ok(slowest < FAIL_FAST_MS, `the slowest answer took ${Math.round(slowest)} ms of the service's`)
  const stored = new Set(await storedItems())
  t.same(acknowledged.filter((name) => !stored.has(name)), [], 'no acknowledged name is missing')
})

t.test('clients that retry their 503s with an Idempotency-Key store every name exactly once across a Redis crash', async (t) => {
  const { app, redis, storedItems } = await buildService(t, { durable: true })
  const statuses = new Set<number>()
  let replays = 0

  /** A client as the README asks for: one key per name, the same key on every retry of a 503. */
  let acknowledged = 0
  async function appendRetrying(name: string): Promise<void> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const res = await app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: { 'idempotency-key': `key-${name}` } })
      statuses.add(res.statusCode)
      if (res.statusCode === 201) {
        acknowledged++
        if (res.headers['idempotent-replayed'] === 'true') replays++
        return
      }
      // The client's back-off before its retry.
      await sleep(10)
    }
    throw new Error(`${name} was never acknowledged`)
  }

  const clients = Array.from({ length: 20 }, async (_, client) => {
    for (let index = 0; index < 25; index++) await appendRetrying(`c${client}-${index}`)
  })
  await until(() => acknowledged >= 40, 'appends acknowledged before the crash')
  await redis.stop()
  await until(() => statuses.has(503), 'an append refused while Redis is down')
  await redis.start()
  await Promise.all(clients)

  t.same([...statuses].sort(), [201, 503], 'the crash failed some attempts')
  const stored = await storedItems()
  const expected = Array.from({ length: 20 }, (_, client) => Array.from({ length: 25 }, (_, index) => `c${client}-${index}`)).flat()
  t.same([...stored].sort(), expected.sort(), 'every name once: none lost, none twice')
  t.comment(`${replays} retries found their first attempt already stored`)
})

t.test('an append answered 503 but stored after all is not stored again when its client retries with its key', async (t) => {
  const { app, redis, storedItems, untilReady } = await buildService(t)
  const attempt = () => app.inject({ method: 'POST', url: '/items/', payload: { name: 'late' }, headers: { 'idempotency-key': 'k-late' } })

  // Frozen, Redis holds the command unread past the deadline; thawed, it runs it.
  redis.pause()
  const first = await attempt()
  redis.resume()
  await untilReady()
  t.equal(first.statusCode, 503)
  t.same(await storedItems(), ['late'], 'the 503 was stored all the same')

  const retry = await attempt()
  t.equal(retry.statusCode, 201)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.same(await storedItems(), ['late'], 'and the retry stored nothing more')
})

t.test('a Redis that stops answering gets 503 within 1 s, not a hanging request', async (t) => {
  const { app, redis, untilReady } = await buildService(t)
  redis.pause()
  t.teardown(() => redis.resume())

  for (const [method, url, payload] of [['POST', '/items/', { name: 'x' }], ['GET', '/items/'], ['GET', '/ready']] as const) {
    const { res, elapsedMs } = await timedInject(app, method, url, payload)
    t.equal(res.statusCode, 503, `${method} ${url}`)
    t.ok(elapsedMs < FAIL_FAST_MS, `${method} ${url} answered in ${Math.round(elapsedMs)} ms of the service's`)
  }

  redis.resume()
  await untilReady()
  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
})

t.test('the service starts while Redis is down and serves once Redis comes up', async (t) => {
  const redis = await createPrivateRedis()
  t.teardown(() => redis.dispose())
  const { app, untilReady } = await buildService(t, { redis, ready: false })

  const { res, elapsedMs } = await timedInject(app, 'POST', '/items/', { name: 'early' })
  t.equal(res.statusCode, 503)
  t.same(res.json(), STORE_UNAVAILABLE)
  t.ok(elapsedMs < FAIL_FAST_MS, `answered in ${Math.round(elapsedMs)} ms of the service's`)
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 503)

  await redis.start()
  await untilReady()
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'late' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: ['late'] })
})

t.test('a Redis full under noeviction refuses writes (OOM): appends answer 503, nothing is dropped, reads still answer', async (t) => {
  const { app, inspector, storedItems } = await buildService(t)
  t.equal((await app.inject({ method: 'POST', url: '/items', payload: { name: 'kept' } })).statusCode, 201)
  // What the durable Redis does once full (docs/redis.md, *Why apart*): refuse every write rather than evict a key.
  await inspector.configSet({ maxmemory: '1', 'maxmemory-policy': 'noeviction' })
  t.teardown(() => inspector.configSet({ maxmemory: '0' }))
  for (const headers of [{}, { 'idempotency-key': 'full-1' }]) {
    const res = await app.inject({ method: 'POST', url: '/items', headers, payload: { name: 'refused' } })
    t.equal(res.statusCode, 503)
    t.same(res.json(), STORE_UNAVAILABLE)
  }
  t.equal((await app.inject({ method: 'DELETE', url: '/items/kept' })).statusCode, 200, 'a delete frees memory: Redis lets it through')
  t.same(await storedItems(), [])
  t.equal((await app.inject({ method: 'GET', url: '/items' })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200, 'a full Redis is not an unreachable one')
})
