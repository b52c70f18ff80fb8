import t from 'tap'
import { createClient } from 'redis'
import { startPrivateRedis } from '@repo/test-support'
import { CHUNK_NAMES, listKeys } from '../../src/store/layout.ts'
import { appendArguments, ITEM_STORE_SCRIPTS } from '../../src/store/scripts.ts'
import { buildService } from '../helpers/service.ts'

// The append scripts as the store sends them: without a list id in the common case, so that an
// append builds nothing per call; a script that would have to make the layout answers 'nolayout'
// having written nothing, and the store sends it again with an id.

const redis = await startPrivateRedis({ durable: false })
t.teardown(() => redis.dispose())
const client = createClient({ socket: { host: '127.0.0.1', port: redis.port }, scripts: ITEM_STORE_SCRIPTS })
await client.connect()
t.teardown(() => client.destroy())
const keys = listKeys('items')
const list = appendArguments(keys, 1_000_000)

t.beforeEach(async () => {
  await client.flushAll()
})

t.test('an append without a list id where there is no list answers nolayout and writes nothing; with an id it makes the list', async (t) => {
  t.equal(await client.append(list, '', 'first'), 'nolayout')
  t.equal(await client.dbSize(), 0, 'nothing written')
  t.equal(await client.append(list, 'the-id', 'first'), 'appended')
  t.equal(await client.zScore(keys.index, 'id:the-id'), Number.NEGATIVE_INFINITY)
  t.equal(await client.append(list, '', 'second'), 'appended', 'the list exists: no id needed')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['first', 'second'])
  t.same(await client.hGetAll(keys.header), { count: '2', id: 'the-id', tail: '1', fill: '2' })
})

t.test('an append without a list id where an earlier version’s list is leaves it as it was, and answers nolayout', async (t) => {
  await client.rPush(keys.index, ['old 1', 'old 2'])
  t.equal(await client.append(list, '', 'new'), 'nolayout')
  t.equal(await client.type(keys.index), 'list', 'not moved aside')
  t.same(await client.lRange(keys.index, 0, -1), ['old 1', 'old 2'])
  t.equal(await client.exists(keys.header), 0)
  t.equal(await client.append(list, 'the-id', 'new'), 'appended')
  t.same(await client.lRange(keys.legacy, 0, -1), ['old 1', 'old 2', 'new'], 'after the names it still has to move in')
})

t.test('an idempotent append without a list id where there is no list answers nolayout and keeps no record', async (t) => {
  const record = keys.idempotency('key-a')
  t.equal(await client.appendOnce(list, '', 'first', record, 'print', '60'), 'nolayout')
  t.equal(await client.dbSize(), 0, 'nothing written, the record neither')
  t.equal(await client.appendOnce(list, 'the-id', 'first', record, 'print', '60'), 'appended')
  t.equal(await client.get(record), 'print')
  t.equal(await client.appendOnce(list, '', 'first', record, 'print', '60'), 'replayed')
  t.equal(await client.appendOnce(list, '', 'second', keys.idempotency('key-b'), 'print b', '60'), 'appended')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['first', 'second'])
})

t.test('the common append opens the next chunk once its chunk has had CHUNK_NAMES names, and after a tail chunk deleted whole', async (t) => {
  await client.append(list, 'the-id', 'name 0')
  for (let index = 1; index <= CHUNK_NAMES; index++) await client.append(list, '', `name ${index}`)
  t.equal(await client.lLen(keys.chunk(1)), CHUNK_NAMES)
  t.same(await client.lRange(keys.chunk(2), 0, -1), [`name ${CHUNK_NAMES}`])
  t.same(await client.hGetAll(keys.header), { count: String(CHUNK_NAMES + 1), id: 'the-id', tail: '2', fill: '1' })
  t.same(await client.zRange(keys.index, 0, -1), ['id:the-id', '1', '2'])
  // A delete that empties the tail chunk drops it and closes it (fill = CHUNK_NAMES): a reader may hold a place in it.
  const removed = await client.removeStep(keys, 'unused', keys.deleting('x'), `name ${CHUNK_NAMES}`, 'token', 0, 100_000, 1_000, false)
  t.same(removed, { state: 'done', removed: 1 })
  t.equal(await client.append(list, '', 'after'), 'appended')
  t.equal(await client.exists(keys.chunk(2)), 0, 'the dropped chunk is not written again')
  t.same(await client.lRange(keys.chunk(3), 0, -1), ['after'])
  t.same(await client.hGetAll(keys.header), { count: String(CHUNK_NAMES + 1), id: 'the-id', tail: '3', fill: '1' })
})

t.test('the common append refuses at the cap, and writes nothing', async (t) => {
  const capped = appendArguments(keys, 2)
  await client.append(capped, 'the-id', 'a')
  await client.append(capped, '', 'b')
  t.equal(await client.append(capped, '', 'c'), 'full')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['a', 'b'])
  t.equal(await client.hGet(keys.header, 'count'), '2')
})

t.test('the store’s append where no list is (the database flushed under a running replica) makes the list anew, and is read', async (t) => {
  const { app, inspector, storedItems } = await buildService(t)
  await app.itemStore.append('before')
  await inspector.flushAll()
  await app.itemStore.append('after')
  await app.itemStore.appendOnce('once', 'key-a')
  t.same(await storedItems(), ['after', 'once'])
  await inspector.flushAll()
  t.equal(await app.itemStore.appendOnce('first', 'key-b'), 'appended')
  t.same(await storedItems(), ['first'])
})
