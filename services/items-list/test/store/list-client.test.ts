import t from 'tap'
import pino from 'pino'
import { createRedisConnection } from '@repo/service-kit'
import { startPrivateRedis } from '@repo/test-support'
import { createListClient, type ChunkKey } from '../../src/store/list-client.ts'
import { NO_LAYOUT } from '../../src/store/lua.ts'
import { ITEM_STORE_SCRIPTS } from '../../src/store/scripts.ts'
import { connectInspector } from '../helpers/service.ts'

// How the store's parts send commands about the list: a script's refusal made an
// InconsistentListError and reported, the layout made only after a look for chunks no index
// numbers, and the chunk keys found whatever their numbers.

const redis = await startPrivateRedis({ durable: false })
t.teardown(() => redis.dispose())
const connection = createRedisConnection({ target: { host: '127.0.0.1', port: redis.port }, scripts: ITEM_STORE_SCRIPTS, logger: pino({ level: 'silent' }), purpose: 'test' })
t.teardown(() => connection.close())
const inspector = await connectInspector(redis.port)
t.teardown(() => inspector.destroy())
const refusals: string[] = []
const list = createListClient(connection, { key: 'items', onInconsistent: (command, reason) => refusals.push(`${command}: ${reason}`) })
while (!connection.isAvailable) await new Promise((resolve) => setTimeout(resolve, 20))

t.beforeEach(async () => {
  await inspector.flushAll()
  refusals.length = 0
})

async function allChunkKeys(): Promise<ChunkKey[]> {
  const found: ChunkKey[] = []
  for await (const step of list.chunkKeys('check')) found.push(...step)
  return found.sort((a, b) => a.number - b.number)
}

t.test('withLayout sends without an id first; on nolayout it looks for chunks, then sends again with a fresh id', async (t) => {
  const sent: string[] = []
  const outcome = await list.withLayout('append', async (listId) => {
    sent.push(listId)
    return listId === '' ? NO_LAYOUT : 'made'
  })
  t.equal(outcome, 'made')
  t.equal(sent.length, 2)
  t.equal(sent[0], '')
  t.match(sent[1], /^[\w-]{13,}$/, 'a fresh id the second time')
  t.same(await list.withLayout('append', async () => 'there'), 'there', 'a list already there: sent once')
})

t.test('withLayout refuses to make a list over chunks left without an index and a header, whatever their numbers, and reports it', async (t) => {
  await inspector.rPush('items:chunk:7', 'left behind')
  let sends = 0
  await t.rejects(
    list.withLayout('append', async () => {
      sends++
      return NO_LAYOUT
    }),
    { name: 'InconsistentListError', message: 'the index and the header are gone, and items:chunk:7 is still there' },
  )
  t.equal(sends, 1, 'not sent again with an id')
  t.same(refusals, ['append: the index and the header are gone, and items:chunk:7 is still there'])
})

t.test('check: an absent list is consistent unless chunks are left; keys that disagree are refused with their reason', async (t) => {
  await list.check('check')
  await inspector.rPush('items:chunk:3', 'left behind')
  await t.rejects(list.check('check'), { name: 'InconsistentListError', message: 'the index and the header are gone, and items:chunk:3 is still there' })
  await inspector.hSet('items:header', { count: 2, id: 'x', tail: 3, fill: 1 })
  await t.rejects(list.check('check'), { name: 'InconsistentListError', message: 'the index at ITEMS_KEY is gone while its header counts 2 names' })
  t.same(refusals, ['check: the index and the header are gone, and items:chunk:3 is still there', 'check: the index at ITEMS_KEY is gone while its header counts 2 names'])
})

t.test('chunkKeys finds every chunk key of the list, in steps, and nothing that is not one', async (t) => {
  const numbers = Array.from({ length: 2_500 }, (_, index) => index * 7 + 1)
  for (let first = 0; first < numbers.length; first += 500) {
    await Promise.all(numbers.slice(first, first + 500).map((number) => inspector.rPush(`items:chunk:${number}`, 'x')))
  }
  await inspector.set('items:chunk:99999', 'a string, not a chunk')
  for (const other of ['items:chunk:abc', 'items:chunk:0', 'other:chunk:1', 'itemsx:chunk:1']) await inspector.rPush(other, 'x')
  const found = await allChunkKeys()
  // SCAN may give a key twice (a table being resized): every one at least once is its promise.
  t.same([...new Set(found.map(({ number }) => number))], numbers, 'every one')
  t.ok(found.every(({ key, number }) => key === `items:chunk:${number}`), 'each with its own number')
})
