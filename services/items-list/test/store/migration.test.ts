import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { startPrivateRedis } from '@repo/test-support'
import { buildService, clearList, connectInspector, nameAt, storedList, untilMigrated, writeEarlierList, type Inspector } from '../helpers/service.ts'

// The upgrade from a version that kept the list as one Redis list at ITEMS_KEY (RPUSH, LRANGE,
// LREM): the service moves it into chunks by itself, online, and serves it all the while.

const MILLION = 1_000_000
const everyName = (count: number) => Array.from({ length: count }, (_, index) => nameAt(index))

/** A private Redis holding `count` names as the earlier version wrote them, and a client on it. */
async function earlierRedis(count: number) {
  const redis = await startPrivateRedis({ durable: false })
  t.teardown(() => redis.dispose())
  const inspector = await connectInspector(redis.port)
  t.teardown(() => inspector.destroy())
  await writeEarlierList(inspector, 'items', count)
  return { redis, inspector }
}

/** Whether the list is part in chunks, part still the earlier version's list. */
async function isMidMove(inspector: Inspector): Promise<boolean> {
  return (await inspector.type('items')) === 'zset' && (await inspector.exists('items:legacy')) === 1 && (await inspector.zCard('items')) > 2
}

t.test('a list an earlier version wrote with RPUSH goes on serving, every name in order, and moves into chunks by itself', async (t) => {
  const { redis, inspector } = await earlierRedis(25_000)
  const { app, logs } = await buildService(t, { redis })
  await untilMigrated(inspector, 'items')

  t.same(await storedList(inspector, 'items'), everyName(25_000))
  // The first read learns the list's first chunks, the second guesses them all in one step.
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: everyName(25_000) })
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: everyName(25_000) }, 'read again, whole')
  t.equal(await inspector.hGet('items:header', 'legacy'), null, 'the move, done, cleared legacy from the header')
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'after the move' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: [...everyName(25_000), 'after the move'] }, 'an append after the move is read')
  t.match(await logs.waitFor((line) => line.names !== undefined), { msg: "an earlier version's list is moved into chunks", names: 25_000 })
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /^items_list_unmigrated_names 0$/m)
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /^items_list_names 25001$/m)
})

t.test('while the move is under way, pages, appends and deletes answer as they do for any list', async (t) => {
  const { redis, inspector } = await earlierRedis(MILLION)
  const { app } = await buildService(t, { redis, env: { ITEMS_MAX_COUNT: String(2 * MILLION) } })
  t.ok(await isMidMove(inspector), 'part of the list still to move')

  t.same((await app.inject({ method: 'GET', url: '/items/?limit=3' })).json(), { items: everyName(3) })
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'appended meanwhile' } })).statusCode, 201)
  t.equal((await app.inject({ method: 'DELETE', url: `/items/${nameAt(MILLION - 1)}` })).statusCode, 200, 'a name at the far end of the earlier list')
  t.equal((await app.inject({ method: 'DELETE', url: `/items/${nameAt(1)}` })).statusCode, 200)

  const { items } = (await app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>()
  t.same(items, [nameAt(0), ...everyName(MILLION - 1).slice(2), 'appended meanwhile'], 'every name once, in order, the append after the earlier ones')
  await untilMigrated(inspector, 'items')
  t.same(await storedList(inspector, 'items'), items)
})

t.test('a move cut short by its replica stopping is finished by the next one, every name kept once and in order', async (t) => {
  const { redis, inspector } = await earlierRedis(MILLION)
  const first = await buildService(t, { redis, env: { ITEMS_MAX_COUNT: String(2 * MILLION) } })
  await first.app.close()
  t.ok(await isMidMove(inspector), 'the first replica stopped with part of the list still to move')

  await buildService(t, { redis, env: { ITEMS_MAX_COUNT: String(2 * MILLION) } })
  await untilMigrated(inspector, 'items')
  const stored = await storedList(inspector, 'items')
  t.equal(stored.length, MILLION)
  t.ok(
    stored.every((name, index) => name === nameAt(index)),
    'every name once, in order',
  )
})

t.test('a replica of the earlier version meets a key of another type and fails (its 503), rather than act on part of the list', async (t) => {
  const { redis, inspector } = await earlierRedis(10)
  await buildService(t, { redis })
  // What the earlier version sends for an append, a read and a delete.
  await t.rejects(inspector.rPush('items', 'from an old replica'), /WRONGTYPE/)
  await t.rejects(inspector.lRange('items', 0, -1), /WRONGTYPE/)
  await t.rejects(inspector.lRem('items', 0, nameAt(3)), /WRONGTYPE/)
  await untilMigrated(inspector, 'items')
  t.same(await storedList(inspector, 'items'), everyName(10), 'nothing changed')
})

t.test('a durable Redis killed mid-move (SIGKILL) keeps every name once and in order, and the move resumes by itself', async (t) => {
  // Durable as production runs it: each step is one script, in the append-only file whole or not at all.
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const inspector = await connectInspector(redis.port)
  t.teardown(() => inspector.destroy())
  await writeEarlierList(inspector, 'items', 300_000)
  const { app, untilReady } = await buildService(t, { redis, env: { ITEMS_MAX_COUNT: String(MILLION) } })

  t.ok(await isMidMove(inspector), 'killed with part of the list still to move')
  await redis.stop('SIGKILL')
  await redis.start()
  await untilReady()
  await untilMigrated(inspector, 'items')
  const stored = await storedList(inspector, 'items')
  t.equal(stored.length, 300_000)
  t.ok(
    stored.every((name, index) => name === nameAt(index)),
    'every name once, in order',
  )
  t.equal((await app.inject({ method: 'GET', url: '/items/?limit=1' })).statusCode, 200)
})

t.test('a read that is the first to meet the earlier list moves it aside and in, and answers it whole', async (t) => {
  const { app, inspector } = await buildService(t)
  await clearList(inspector, 'items')
  await writeEarlierList(inspector, 'items', 20_000)
  t.equal(await inspector.type('items'), 'list', 'as the earlier version left it')
  t.same((await app.inject({ method: 'GET', url: '/items/?limit=9000' })).json(), { items: everyName(9_000) }, 'a page across what one step moves in')
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: everyName(20_000) })
  t.equal(await inspector.type('items'), 'zset')
})

t.test('a read that reaches the earlier list past a gap (the tail chunk deleted whole mid-move) reads on over it, every name once and in order', async (t) => {
  const { app, inspector } = await buildService(t)
  await clearList(inspector, 'items')
  const names = everyName(2_500)
  // Mid-move, as a delete leaves it when it empties the tail chunk (3): the header's tail stays 3,
  // so the next step of the move fills chunk 4, and a read that left chunk 2 for chunk 3 finds none.
  await inspector.rPush('items:chunk:1', names.slice(0, 1_000))
  await inspector.rPush('items:chunk:2', names.slice(1_000, 2_000))
  await inspector.rPush('items:legacy', names.slice(2_000))
  await inspector.zAdd('items', [
    { score: -Infinity, value: 'id:mid-move' },
    { score: 1, value: '1' },
    { score: 2, value: '2' },
    { score: Infinity, value: 'legacy' },
  ])
  await inspector.hSet('items:header', { count: names.length, id: 'mid-move', tail: 3, fill: 1_000, legacy: 1 })
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: names })
  t.same(await inspector.zRange('items', 0, -1), ['id:mid-move', '1', '2', '4'], 'the rest moved in past the gap')
})

t.test('the background move’s retries are a second apart at most: a move Redis held off for seconds resumes within about a second of its return', async (t) => {
  // Durable, so that the earlier list written before the stop is there again at the start.
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const setup = await connectInspector(redis.port)
  await writeEarlierList(setup, 'items', 10)
  setup.destroy()
  await redis.stop()
  const { inspector } = await buildService(t, { redis, ready: false })
  // Retries that kept doubling would be 12.8 s apart by now, the next one 11.5 s after Redis is back.
  await sleep(14_000)

  await redis.start()
  const back = performance.now()
  await untilMigrated(inspector, 'items')
  const waited = performance.now() - back
  // A second at most between tries, and up to half a second for the connection to come back.
  t.ok(waited < 5_000, `moved ${Math.round(waited)} ms after Redis came back`)
  t.same(await storedList(inspector, 'items'), everyName(10))
})
