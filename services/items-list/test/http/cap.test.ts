import t from 'tap'
import { buildService } from '../helpers/service.ts'

const { app, inspector, redis, storedItems, untilReady } = await buildService(t, { env: { ITEMS_MAX_COUNT: '3' } })
const FULL = { detail: 'The list is full: it holds 3 names, the most it may' }

const post = (name: string, key?: string) =>
  app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })

/** One sample of the app's own /metrics. */
async function sample(series: string): Promise<number> {
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  return Number(new RegExp(`^${series} (\\S+)$`, 'm').exec(page)?.[1])
}

t.test('an append past ITEMS_MAX_COUNT answers 507 {"detail"} and adds nothing', async (t) => {
  for (const name of ['a', 'b', 'c']) t.equal((await post(name)).statusCode, 201)
  const refused = await post('d')
  t.equal(refused.statusCode, 507)
  t.same(refused.json(), FULL)
  t.equal(refused.headers['cache-control'], 'no-store')
  t.same(await storedItems(), ['a', 'b', 'c'])
})

t.test('a retried append whose Idempotency-Key was stored before the list filled up still gets its first answer', async (t) => {
  t.equal((await post('a', 'key-a')).statusCode, 201)
  for (const name of ['b', 'c']) await post(name)
  const retried = await post('a', 'key-a')
  t.equal(retried.statusCode, 201)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.same(await storedItems(), ['a', 'b', 'c'])
})

t.test('a new Idempotency-Key at the cap is refused and not recorded: its retry once there is room appends', async (t) => {
  for (const name of ['a', 'b', 'c']) await post(name)
  const refused = await post('d', 'key-d')
  t.equal(refused.statusCode, 507)
  t.equal(await inspector.exists('items:idempotency:key-d'), 0, 'no record of a refused append')

  t.equal((await app.inject({ method: 'DELETE', url: '/items/a' })).statusCode, 200)
  const retried = await post('d', 'key-d')
  t.equal(retried.statusCode, 201)
  t.equal(retried.headers['idempotent-replayed'], undefined, 'appended now, not replayed')
  t.same(await storedItems(), ['b', 'c', 'd'])
})

t.test('a delete makes room again', async (t) => {
  for (const name of ['a', 'b', 'a']) await post(name)
  t.equal((await post('c')).statusCode, 507)
  await app.inject({ method: 'DELETE', url: '/items/a' })
  t.equal((await post('c')).statusCode, 201)
  t.equal((await post('d')).statusCode, 201)
  t.equal((await post('e')).statusCode, 507)
  t.same(await storedItems(), ['b', 'c', 'd'])
})

t.test('/metrics shows the list against its cap, for the alert that warns before appends are refused', async (t) => {
  t.equal(await sample('items_list_max_names'), 3)
  t.equal(await sample('items_list_names'), 0)
  for (const name of ['a', 'b', 'a']) await post(name)
  t.equal(await sample('items_list_names'), 3)
  await app.inject({ method: 'DELETE', url: '/items/a' })
  t.equal(await sample('items_list_names'), 1)
  t.equal(await sample('items_list_unmigrated_names'), 0)
})

t.test('a scrape while Redis does not answer still answers, with the last figures of the list', async (t) => {
  await post('a')
  t.equal(await sample('items_list_names'), 1)
  redis.pause()
  t.teardown(() => redis.resume())
  for (const scrape of ['missing the deadline', 'with Redis set aside']) {
    const res = await app.inject({ method: 'GET', url: '/metrics' })
    t.equal(res.statusCode, 200, scrape)
    t.match(res.body, /^items_list_names 1$/m, scrape)
  }
  t.equal(await sample('items_store_up'), 0, 'and items_store_up says why they may be old')
  redis.resume()
  await untilReady()
})
