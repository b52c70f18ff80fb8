import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { startPrivateRedis } from '@repo/test-support'
import { appendMany, buildService, connectInspector, listAnswers, nameAt } from '../helpers/service.ts'

// The list is many keys: an index at ITEMS_KEY, a header, chunks. When the header and the index
// disagree (the index deleted by hand as the one-list layout was emptied, two lists to move in),
// whatever the store wrote could land where no read looks: it refuses every append, read and
// delete (503, a log line, a metric) and /ready says why, until the list is reset.

const { app, inspector, logs, storedItems } = await buildService(t)

/** `items_store_inconsistent_total{command}` from the app's /metrics. */
async function refusals(command: string): Promise<number> {
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  return Number(new RegExp(`^items_store_inconsistent_total\\{command="${command}"\\} (\\d+)$`, 'm').exec(page)?.[1])
}

t.test('after DEL of the index, appends, reads and deletes answer 503 and store nothing; a log line, a metric and /ready say why', async (t) => {
  for (let index = 0; index < 3; index++) await app.itemStore.append(nameAt(index))
  t.equal(await app.itemStore.appendOnce('recorded', 'k0'), 'appended')
  await app.itemStore.removeAll('recorded')
  const cursor = (await app.inject({ method: 'GET', url: '/items/?limit=1' })).headers.link!.toString().slice(1, -13)
  await inspector.del('items')

  const { statuses, post, ready } = await listAnswers(app)
  t.same(statuses, [503, 503, 503, 503, 503, 503], 'POST, POST with a key, GET, GET a page, DELETE, /ready')
  t.same(post, { detail: 'Item store inconsistent: the index at ITEMS_KEY is gone while its header counts 3 names' })
  t.same(ready, post, '/ready gives the reason')
  t.equal((await app.inject({ method: 'GET', url: cursor })).statusCode, 503, 'a cursor into the list: the list lost its index, the cursor is not foreign')
  const replay = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'recorded' }, headers: { 'idempotency-key': 'k0' } })
  t.equal(replay.statusCode, 503, 'nor a replay, whose 201 would say a read shows the name')
  t.same(await inspector.lRange('items:chunk:1', 0, -1), [nameAt(0), nameAt(1), nameAt(2), ''], 'no name appended where no read looks')
  t.equal(await inspector.hGet('items:header', 'count'), '3', 'nor counted')
  t.match(await logs.waitFor((line) => line.reason !== undefined && line.command === 'append'), {
    level: 50,
    msg: "the list's keys disagree: refusing to append, read or delete until they are repaired or the list is reset",
    reason: 'the index at ITEMS_KEY is gone while its header counts 3 names',
    key: 'items',
  })
  for (const command of ['append', 'append_once', 'read', 'remove_step', 'check']) t.ok((await refusals(command)) >= 1, `${command} refusals counted`)
})

t.test('an index without its id, or without its header, is refused the same way', async (t) => {
  await app.itemStore.append('kept')
  const [id] = await inspector.zRange('items', 0, 0)
  await inspector.zRem('items', id!)
  const lostId = await listAnswers(app)
  t.same(lostId.statuses, [503, 503, 503, 503, 503, 503])
  t.match(lostId.ready, { detail: /^Item store inconsistent: the index at ITEMS_KEY has lost its member id:/ })

  await inspector.hDel('items:header', 'id')
  const neitherId = await listAnswers(app)
  t.same(neitherId.statuses, [503, 503, 503, 503, 503, 503], 'nor an index without its id beside a header without one: never 200 [] over chunks that hold names')
  t.same(neitherId.ready, { detail: 'Item store inconsistent: the index at ITEMS_KEY has no id: member' })
  t.same(await inspector.lRange('items:chunk:1', 0, -1), ['kept'], 'nothing appended')

  await inspector.zAdd('items', { score: -Infinity, value: id! })
  await inspector.del('items:header')
  const noHeader = await listAnswers(app)
  t.same(noHeader.statuses, [503, 503, 503, 503, 503, 503])
  t.same(noHeader.ready, { detail: 'Item store inconsistent: the index at ITEMS_KEY has no header' })
})

t.test('a plain list at the key beside the legacy list (an earlier version appending after DEL mid-move) is refused, not chosen between', async (t) => {
  await inspector.rPush('items:legacy', [nameAt(0), nameAt(1)])
  await inspector.hSet('items:header', { count: 2, legacy: 1, id: 'x', tail: 0, fill: 1000 })
  await inspector.rPush('items', 'from an earlier version')
  const { statuses, ready } = await listAnswers(app)
  t.same(statuses, [503, 503, 503, 503, 503, 503])
  t.same(ready, { detail: 'Item store inconsistent: ITEMS_KEY is a plain list and items:legacy exists: two lists to move in, refusing to choose' })

  await inspector.del('items:legacy')
  t.same((await listAnswers(app)).ready, { detail: 'Item store inconsistent: ITEMS_KEY is a plain list beside the header of a chunked list' }, 'beside the header alone too')
})

t.test('a plain list at the key beside a whole header (its id, no move under way) is refused by the append too: WRONGTYPE is not a score', async (t) => {
  await app.itemStore.append('kept')
  await inspector.del('items')
  await inspector.rPush('items', 'from an earlier version')
  const { statuses, post } = await listAnswers(app)
  t.same(statuses, [503, 503, 503, 503, 503, 503])
  t.same(post, { detail: 'Item store inconsistent: ITEMS_KEY is a plain list beside the header of a chunked list' })
  t.same(await inspector.lRange('items:chunk:1', 0, -1), ['kept'], 'no name appended into a chunk')
  t.equal(await inspector.hGet('items:header', 'count'), '1', 'nor counted')
})

// ensure(), which every script that may write runs before it does, refuses in two cases of its
// own (docs/list.md, "When the keys disagree"): each is planted here, then every route is sent,
// and the move, which ensure() would otherwise let make the layout with the id it is given.

t.test('ensure() refuses a plain list at the key beside a legacy list still to move in: nothing renamed over the names it holds', async (t) => {
  await inspector.rPush('items:legacy', nameAt(0))
  await inspector.rPush('items', nameAt(1))
  const twoLists = await listAnswers(app)
  t.same(twoLists.statuses, [503, 503, 503, 503, 503, 503])
  t.same(twoLists.post, { detail: 'Item store inconsistent: ITEMS_KEY is a plain list and items:legacy exists: two lists to move in, refusing to choose' })
  await t.rejects(app.itemStore.migrate(), { name: 'InconsistentListError' }, 'nor the move')
  t.equal(await inspector.exists('items:header'), 0, 'no header made')
  t.same(await inspector.lRange('items', 0, -1), [nameAt(1)], 'the plain list not renamed')
  t.same(await inspector.lRange('items:legacy', 0, -1), [nameAt(0)], 'the legacy list not written over')
})

t.test('ensure() refuses a key of another type at ITEMS_KEY, and says so: it is left as it is', async (t) => {
  await inspector.set('items', 'a string')
  const otherType = await listAnswers(app)
  t.same(otherType.statuses, [503, 503, 503, 503, 503, 503])
  t.same(otherType.post, { detail: 'Item store inconsistent: ITEMS_KEY holds a string, not the list' })
  await t.rejects(app.itemStore.migrate(), { name: 'InconsistentListError', message: 'ITEMS_KEY holds a string, not the list' }, 'nor the move')
  t.equal(await inspector.exists('items:header'), 0, 'no header made')
  t.equal(await inspector.get('items'), 'a string', 'left as it is')
})

t.test('a header written before it kept the id is given the index’s: the list is served throughout', async (t) => {
  await app.itemStore.append('before')
  const id = await inspector.hGet('items:header', 'id')
  await inspector.hDel('items:header', 'id')
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: ['before'] })
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'after' } })).statusCode, 201)
  t.equal(await inspector.hGet('items:header', 'id'), id)
  t.same(await storedItems(), ['before', 'after'])
})

t.test('with chunk 1 itself emptied before the index and header went, the chunks left are still found and refused', async (t) => {
  await appendMany(app, 2_000, (index) => (index < 1_000 ? 'first' : nameAt(index)))
  t.equal((await app.inject({ method: 'DELETE', url: '/items/first' })).statusCode, 200)
  await inspector.del(['items', 'items:header'])
  const { statuses, post, ready } = await listAnswers(app)
  t.same(statuses, [503, 503, 503, 503, 503, 503], 'appends, reads, deletes and /ready')
  t.same(post, { detail: 'Item store inconsistent: the index and the header are gone, and items:chunk:2 is still there' })
  t.same(ready, post)
  t.equal(await inspector.lLen('items:chunk:2'), 1_000, 'nothing appended into it')
  t.equal(await inspector.exists(['items', 'items:header']), 0, 'no layout made over it')

  await app.itemStore.reset()
  t.same(await inspector.keys('items:chunk:*'), [], 'the reset deletes it')
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
})

t.test('the background move logs its failing step once, not at every try, and once more when it goes on', async (t) => {
  const stuck = await startPrivateRedis({ durable: false })
  t.teardown(() => stuck.dispose())
  const setup = await connectInspector(stuck.port)
  t.teardown(() => setup.destroy())
  await setup.rPush('items:legacy', nameAt(0))
  await setup.rPush('items', nameAt(1))
  const service = await buildService(t, { redis: stuck, ready: false })
  // Tries a second apart at most: three or more in 3 s.
  await sleep(3_000)
  const failures = service.logs.lines.filter((line) => line.msg === "the move of an earlier version's list into chunks failed; trying again every second at most")
  t.equal(failures.length, 1, 'logged once')
  t.match(failures[0], { level: 40, reason: 'ITEMS_KEY is a plain list and items:legacy exists: two lists to move in, refusing to choose' })

  await setup.del('items:legacy')
  t.ok(await service.logs.waitFor((line) => line.msg === "the move of an earlier version's list into chunks goes on again", 6_000))
  t.same(await service.storedItems(), [nameAt(1)])
})
