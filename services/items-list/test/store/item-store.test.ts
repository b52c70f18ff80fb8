import t from 'tap'
import { performance } from 'node:perf_hooks'
import Fastify, { type FastifyInstance } from 'fastify'
import { createClient } from 'redis'
import { loadConfig } from '@repo/config'
import { RedisUnavailableError } from '@repo/service-kit'
import { startPrivateRedis } from '@repo/test-support'
import { ItemsListConfig } from '../../src/config.ts'
import { itemStore } from '../../src/store/plugin.ts'
import { buildService, connectInspector, storedList } from '../helpers/service.ts'

// The store as the app's item-store plugin opens it from the configuration (`app.itemStore`):
// what the routes call, with the connection production gives it.

/** Every name the store's reads give, from the start, step by step. */
async function listed(app: FastifyInstance): Promise<string[]> {
  const names: string[] = []
  for await (const step of app.itemStore.steps()) names.push(...step.names)
  return names
}

t.test('removeAll reports how many occurrences it removed', async (t) => {
  const { app, storedItems } = await buildService(t)
  for (const name of ['a', 'b', 'a', 'a']) await app.itemStore.append(name)
  t.equal(await app.itemStore.removeAll('a'), 3)
  t.equal(await app.itemStore.removeAll('a'), 0)
  t.same(await storedItems(), ['b'])
})

t.test('the list is kept at ITEMS_KEY in the database REDIS_DB names', async (t) => {
  const { app, redis } = await buildService(t, { env: { REDIS_DB: '2', ITEMS_KEY: 'shopping' } })
  const inDb2 = await connectInspector(redis.port)
  const inDb0 = await connectInspector(redis.port)
  t.teardown(() => {
    inDb2.destroy()
    inDb0.destroy()
  })
  await inDb2.select(2)

  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'only in db 2' } })).statusCode, 201)
  t.same(await storedList(inDb2, 'shopping'), ['only in db 2'])
  t.same(await inDb0.keys('*'), [], 'nothing in database 0')
})

t.test('REDIS_PASSWORD authenticates; without it a protected Redis is unavailable', async (t) => {
  const protectedRedis = await startPrivateRedis({ args: ['--requirepass', 's3cret'] })
  t.teardown(() => protectedRedis.dispose())
  const withPassword = await buildService(t, { redis: protectedRedis, env: { REDIS_PASSWORD: 's3cret' } })
  const withoutPassword = await buildService(t, { redis: protectedRedis, ready: false })

  t.equal((await withPassword.app.inject({ method: 'POST', url: '/items/', payload: { name: 'allowed' } })).statusCode, 201)
  t.same(await withPassword.storedItems(), ['allowed'])
  await t.rejects(listed(withoutPassword.app), RedisUnavailableError)
  t.equal((await withoutPassword.app.inject({ method: 'GET', url: '/ready' })).statusCode, 503)
  t.notMatch(withPassword.logs.text(), 's3cret', 'the password is never logged')
})

t.test('REDIS_URL replaces host, port, password and database, and its password is never logged', async (t) => {
  const protectedRedis = await startPrivateRedis({ args: ['--requirepass', 's3cret'] })
  t.teardown(() => protectedRedis.dispose())
  const { app, logs } = await buildService(t, {
    redis: protectedRedis,
    env: { REDIS_URL: `redis://:s3cret@127.0.0.1:${protectedRedis.port}/5`, REDIS_HOST: 'nowhere.invalid', REDIS_PORT: '1' },
  })
  const inDb5 = createClient({ socket: { host: '127.0.0.1', port: protectedRedis.port }, password: 's3cret', database: 5 })
  await inDb5.connect()
  t.teardown(() => inDb5.destroy())

  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'via url' } })).statusCode, 201)
  t.same(await storedList(inDb5, 'items'), ['via url'], 'in the database the URL names')
  t.match(logs.text(), `"url":"redis://127.0.0.1:${protectedRedis.port}/5"`)
  t.match(logs.lines.find((line) => line.msg === 'connecting to Redis'), { purpose: 'item store' }, 'the line names the connection')
  t.notMatch(logs.text(), 's3cret')
})

t.test('a command Redis does not answer within 500 ms fails with RedisUnavailableError; later ones fail at once', async (t) => {
  const { app, redis, untilReady } = await buildService(t)
  redis.pause()
  t.teardown(() => redis.resume())

  await t.rejects(listed(app), new RedisUnavailableError('Redis did not answer within 500 ms', { timedOut: true }))
  // Waiting again would take the whole deadline and end in its message.
  const started = performance.now()
  await t.rejects(app.itemStore.check(), new RedisUnavailableError('Redis is not available'), 'a Redis that missed a deadline is not waited on again')
  t.ok(performance.now() - started < 500, `refused in ${Math.round(performance.now() - started)} ms, before a deadline could pass`)

  redis.resume()
  await untilReady()
  t.same(await listed(app), [], 'answered again once Redis is back')
})

t.test('REDIS_DEADLINE_MS is the deadline of every command: a Redis that does not answer is given up on past it', async (t) => {
  const { app, redis, untilReady } = await buildService(t, { env: { REDIS_DEADLINE_MS: '1200' } })
  redis.pause()
  t.teardown(() => redis.resume())

  await t.rejects(listed(app), new RedisUnavailableError('Redis did not answer within 1200 ms', { timedOut: true }))
  redis.resume()
  await untilReady()
})

t.test('closing the app gives up waiting on a Redis that stopped answering, and still closes', async (t) => {
  const { app, redis, logs } = await buildService(t)
  redis.pause()
  t.teardown(() => redis.resume())
  const pending = app.itemStore.append('never answered').catch((error: unknown) => error)

  const started = performance.now()
  await app.close()
  t.ok(performance.now() - started < 2_000, `closed in ${Math.round(performance.now() - started)} ms`)
  t.type(await pending, RedisUnavailableError)
  t.ok(logs.lines.some((line) => line.msg === 'Redis connection closed'))
})

t.test('a closed app’s store answers RedisUnavailableError, and closing again is harmless', async (t) => {
  const { app } = await buildService(t)
  await app.close()
  await t.rejects(app.itemStore.append('late'), RedisUnavailableError)
  await t.resolves(app.close())
})

t.test('the item-store plugin refuses an app without the metrics registry it adds the store’s metrics to, and names it', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const config = loadConfig(ItemsListConfig, {})
  await t.rejects(async () => app.register(itemStore, { config }), { code: 'FST_ERR_PLUGIN_NOT_PRESENT_IN_INSTANCE', message: /metrics/ })
})

t.test('a reader that leaves mid-read, then the step read ahead for it failing, does not crash the replica (no unhandled rejection)', async (t) => {
  const { app, inspector } = await buildService(t)
  for (let index = 0; index < 3_000; index++) await app.itemStore.append(`name ${index}`)
  // Chunk 103, past a gap, is not a Redis list: the step that reads it fails, every time.
  await inspector.zAdd('items', { score: 103, value: '103' })
  await inspector.set('items:chunk:103', 'not a chunk')
  const unhandled: unknown[] = []
  const record = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', record)
  t.teardown(() => process.off('unhandledRejection', record))

  const listId = (await inspector.hGet('items:header', 'id'))!
  const reading = app.itemStore.steps({ listId, chunk: 1, offset: 0 })
  const first = await reading.next()
  t.equal(first.value?.names.length, 3_000, 'the chunks before the gap, while the step after them is read ahead')
  // What the HTTP answer does when its client goes away.
  await reading.return()
  await t.rejects(app.itemStore.steps({ listId, chunk: 103, offset: 0 }).next(), RedisUnavailableError, 'the step read ahead fails')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(unhandled, [])
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200, 'the replica serves on')
})
