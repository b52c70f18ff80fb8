import t from 'tap'
import { createClient } from 'redis'
import { startPrivateRedis } from '@repo/test-support'
import { CHUNK_NAMES, listKeys } from '../../src/store/layout.ts'
import { appendArguments, ITEM_STORE_SCRIPTS, type AppendArguments } from '../../src/store/scripts.ts'
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
const list = appendArguments(keys, 1_000_000, 60)

/** One append sent as a group of its own: its outcome, or 'nolayout'. */
async function appendAlone(args: AppendArguments, listId: string, name: string, record?: string, fingerprint?: string) {
  const reply = await client.appendGroup(args, listId, [record === undefined || fingerprint === undefined ? { name } : { name, record, fingerprint }])
  return reply === 'nolayout' ? reply : reply[0]
}

t.beforeEach(async () => {
  await client.flushAll()
})

t.test('an append without a list id where there is no list answers nolayout and writes nothing; with an id it makes the list', async (t) => {
  t.equal(await appendAlone(list, '', 'first'), 'nolayout')
  t.equal(await client.dbSize(), 0, 'nothing written')
  t.equal(await appendAlone(list, 'the-id', 'first'), 'appended')
  t.equal(await client.zScore(keys.index, 'id:the-id'), Number.NEGATIVE_INFINITY)
  t.equal(await appendAlone(list, '', 'second'), 'appended', 'the list exists: no id needed')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['first', 'second'])
  t.same(await client.hGetAll(keys.header), { count: '2', id: 'the-id', tail: '1', fill: '2' })
})

t.test('an append without a list id where an earlier version’s list is leaves it as it was, and answers nolayout', async (t) => {
  await client.rPush(keys.index, ['old 1', 'old 2'])
  t.equal(await appendAlone(list, '', 'new'), 'nolayout')
  t.equal(await client.type(keys.index), 'list', 'not moved aside')
  t.same(await client.lRange(keys.index, 0, -1), ['old 1', 'old 2'])
  t.equal(await client.exists(keys.header), 0)
  t.equal(await appendAlone(list, 'the-id', 'new'), 'appended')
  t.same(await client.lRange(keys.legacy, 0, -1), ['old 1', 'old 2', 'new'], 'after the names it still has to move in')
})

t.test('an idempotent append without a list id where there is no list answers nolayout and keeps no record', async (t) => {
  const record = keys.idempotency('key-a')
  t.equal(await appendAlone(list, '', 'first', record, 'print'), 'nolayout')
  t.equal(await client.dbSize(), 0, 'nothing written, the record neither')
  t.equal(await appendAlone(list, 'the-id', 'first', record, 'print'), 'appended')
  t.equal(await client.get(record), 'print')
  t.equal(await appendAlone(list, '', 'first', record, 'print'), 'replayed')
  t.equal(await appendAlone(list, '', 'second', keys.idempotency('key-b'), 'print b'), 'appended')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['first', 'second'])
})

t.test('the common append opens the next chunk once its chunk has had CHUNK_NAMES names, and after a tail chunk deleted whole', async (t) => {
  await appendAlone(list, 'the-id', 'name 0')
  for (let index = 1; index <= CHUNK_NAMES; index++) await appendAlone(list, '', `name ${index}`)
  t.equal(await client.lLen(keys.chunk(1)), CHUNK_NAMES)
  t.same(await client.lRange(keys.chunk(2), 0, -1), [`name ${CHUNK_NAMES}`])
  t.same(await client.hGetAll(keys.header), { count: String(CHUNK_NAMES + 1), id: 'the-id', tail: '2', fill: '1' })
  t.same(await client.zRange(keys.index, 0, -1), ['id:the-id', '1', '2'])
  // A delete that empties the tail chunk drops it and closes it (fill = CHUNK_NAMES): a reader may hold a place in it.
  const removed = await client.removeStep(keys, 'unused', keys.deleting('x'), `name ${CHUNK_NAMES}`, 'token', 0, 100_000, 1_000, false)
  t.same(removed, { state: 'done', removed: 1 })
  t.equal(await appendAlone(list, '', 'after'), 'appended')
  t.equal(await client.exists(keys.chunk(2)), 0, 'the dropped chunk is not written again')
  t.same(await client.lRange(keys.chunk(3), 0, -1), ['after'])
  t.same(await client.hGetAll(keys.header), { count: String(CHUNK_NAMES + 1), id: 'the-id', tail: '3', fill: '1' })
})

t.test('the common append refuses at the cap, and writes nothing', async (t) => {
  const capped = appendArguments(keys, 2, 60)
  await appendAlone(capped, 'the-id', 'a')
  await appendAlone(capped, '', 'b')
  t.equal(await appendAlone(capped, '', 'c'), 'full')
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['a', 'b'])
  t.equal(await client.hGet(keys.header, 'count'), '2')
})

t.test('a group appends its names in arrival order and answers each append in its place: one refused at the cap in the middle shifts no neighbour', async (t) => {
  const capped = appendArguments(keys, 4, 60)
  const recorded = keys.idempotency('key-old')
  await appendAlone(capped, 'the-id', 'old', recorded, 'print old')
  const group = [
    { name: 'a' },
    { name: 'b', record: keys.idempotency('key-b'), fingerprint: 'print b' },
    { name: 'c' },
    { name: 'd' },
    { name: 'old', record: recorded, fingerprint: 'print old' },
    { name: 'other', record: recorded, fingerprint: 'print other' },
    { name: 'b', record: keys.idempotency('key-b'), fingerprint: 'print b' },
    { name: 'e', record: keys.idempotency('key-e'), fingerprint: 'print e' },
  ]
  t.same(
    await client.appendGroup(capped, '', group),
    ['appended', 'appended', 'appended', 'full', 'replayed', 'conflict', 'replayed', 'full'],
    'stored up to the cap, then full; a key used before, or earlier in the group, replayed or in conflict',
  )
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['old', 'a', 'b', 'c'], 'exactly as many as the cap allows, in order')
  t.same(await client.hGetAll(keys.header), { count: '4', id: 'the-id', tail: '1', fill: '4' })
  t.equal(await client.get(keys.idempotency('key-b')), 'print b', 'the record of an append stored in the group')
  t.ok((await client.ttl(keys.idempotency('key-b'))) > 0)
  t.equal(await client.exists(keys.idempotency('key-e')), 0, 'none for an append refused at the cap')
})

t.test('a group opens the next chunk when its chunk fills mid-group, and a group of conflicts alone needs no list', async (t) => {
  await appendAlone(list, 'the-id', 'name 0')
  await client.appendGroup(list, '', Array.from({ length: CHUNK_NAMES - 3 }, (_, index) => ({ name: `name ${index + 1}` })))
  const group = Array.from({ length: 5 }, (_, index) => ({ name: `late ${index}` }))
  t.same(await client.appendGroup(list, '', group), group.map(() => 'appended'))
  t.same(await client.lRange(keys.chunk(1), -2, -1), ['late 0', 'late 1'])
  t.same(await client.lRange(keys.chunk(2), 0, -1), ['late 2', 'late 3', 'late 4'])
  t.same(await client.zRange(keys.index, 0, -1), ['id:the-id', '1', '2'])
  t.same(await client.hGetAll(keys.header), { count: String(CHUNK_NAMES + 3), id: 'the-id', tail: '2', fill: '3' })

  await client.flushAll()
  await client.set(keys.idempotency('used'), 'print a')
  t.same(await client.appendGroup(list, '', [{ name: 'b', record: keys.idempotency('used'), fingerprint: 'print b' }]), ['conflict'], 'no list, and no nolayout')
})

t.test('a group sent without a list id where there is no list answers nolayout and writes nothing, its records neither', async (t) => {
  const group = [{ name: 'a' }, { name: 'b', record: keys.idempotency('key-b'), fingerprint: 'print b' }]
  t.equal(await client.appendGroup(list, '', group), 'nolayout')
  t.equal(await client.dbSize(), 0)
  t.same(await client.appendGroup(list, 'the-id', group), ['appended', 'appended'])
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['a', 'b'])
})

t.test('a group is never written in part: a chunk it would open already there refuses it whole, before its first write', async (t) => {
  await appendAlone(list, 'the-id', 'name 0')
  await client.appendGroup(list, '', Array.from({ length: CHUNK_NAMES - 3 }, (_, index) => ({ name: `name ${index + 1}` })))
  const header = await client.hGetAll(keys.header)
  // Not a list: a push into it fails. Without the check, the group's first two names would be
  // written into chunk 1, and the error would come on the third.
  await client.set(keys.chunk(2), 'not a chunk')
  const group = Array.from({ length: 5 }, (_, index) => ({ name: `late ${index}`, record: keys.idempotency(`late-${index}`), fingerprint: `print ${index}` }))
  await t.rejects(client.appendGroup(list, '', group), { message: /^INCONSISTENT chunk 2 is there already, past the last chunk 1/ })
  t.equal(await client.lLen(keys.chunk(1)), CHUNK_NAMES - 2, 'no name written')
  t.same(await client.hGetAll(keys.header), header, 'nor counted')
  t.same(await client.keys(keys.idempotency('*')), [], 'nor recorded')
})

t.test('a group is never written in part: an idempotency record that is not a string fails it whole, before its first write', async (t) => {
  await appendAlone(list, 'the-id', 'first')
  await client.rPush(keys.idempotency('broken'), 'not a record')
  const group = [{ name: 'a', record: keys.idempotency('key-a'), fingerprint: 'print a' }, { name: 'b' }, { name: 'c', record: keys.idempotency('broken'), fingerprint: 'print c' }]
  await t.rejects(client.appendGroup(list, '', group), { message: /WRONGTYPE/ })
  t.same(await client.lRange(keys.chunk(1), 0, -1), ['first'], 'no name written')
  t.equal(await client.exists(keys.idempotency('key-a')), 0, 'nor recorded')
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
