import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { eventually } from '@repo/test-support'
import { buildService, clearList, nameAt, writeEarlierList, type Inspector, type ServiceUnderTest } from '../helpers/service.ts'

// The held list: a short list read from its start is kept by the replica that read it, and answered
// again after a revalidation of the header's version and the index's id (docs/list.md, "The held list").
// Each test reads the list until the replica holds it, then writes it some other way and asserts
// the next GET answers what Redis holds: a held list never hides a write.

/** Calls Redis answered, by command, since the last reset (`INFO commandstats`). */
async function commandCalls(inspector: Inspector): Promise<Record<string, number>> {
  const calls: Record<string, number> = {}
  for (const [, command, count] of (await inspector.info('commandstats')).matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)) calls[command!] = Number(count)
  return calls
}

async function listed(app: FastifyInstance): Promise<string[]> {
  const answer = await app.inject({ method: 'GET', url: '/items/' })
  if (answer.statusCode !== 200) throw new Error(`GET /items/ answered ${answer.statusCode}: ${answer.body}`)
  return answer.json<{ items: string[] }>().items
}

/** Reads the list until its replica answers it from a check alone, and returns what it read. */
async function held(service: ServiceUnderTest): Promise<string[]> {
  const { app, inspector } = service
  const names = await listed(app)
  t.same(await listed(app), names)
  await inspector.configResetStat()
  t.same(await listed(app), names)
  const calls = await commandCalls(inspector)
  if (calls.lrange !== undefined || calls.hmget !== 1 || calls.zscore !== 1) throw new Error(`not held: ${JSON.stringify(calls)}`)
  return names
}

/** Round trips the store counted under `command` (`items_store_commands_total`). */
async function sent(app: FastifyInstance, command: string): Promise<number> {
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  return Number(new RegExp(`^items_store_commands_total\\{command="${command}",outcome="ok"\\} (\\d+)`, 'm').exec(metrics)?.[1])
}

const append = async (app: FastifyInstance, name: string) => t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name } })).statusCode, 201)
const remove = async (app: FastifyInstance, name: string) => t.equal((await app.inject({ method: 'DELETE', url: `/items/${name}` })).statusCode, 200)

t.test('a short list read twice unchanged is answered from one check of two O(1) commands: no chunk is read', async (t) => {
  const service = await buildService(t)
  for (const name of ['a', 'b', 'c']) await append(service.app, name)
  t.same(await held(service), ['a', 'b', 'c'])

  await service.inspector.configResetStat()
  const answers = await Promise.all(Array.from({ length: 20 }, () => service.app.inject({ method: 'GET', url: '/items/' })))
  t.same(new Set(answers.map((answer) => answer.body)), new Set(['{"items":["a","b","c"]}']))
  t.same(await commandCalls(service.inspector), { hmget: 20, zscore: 20, 'config|resetstat': 1 }, 'one HMGET and one ZSCORE a GET, nothing else')
  t.ok((await sent(service.app, 'held_list')) >= 21, 'counted as held_list')
})

t.test('writes through another replica show in the next GET of the replica that holds the list', async (t) => {
  const reader = await buildService(t)
  const writer = await buildService(t, { redis: reader.redis })
  for (const name of ['a', 'b', 'c']) await append(writer.app, name)
  t.same(await held(reader), ['a', 'b', 'c'])

  await append(writer.app, 'd')
  t.same(await listed(reader.app), ['a', 'b', 'c', 'd'], 'an append')
  await held(reader)
  await remove(writer.app, 'b')
  t.same(await listed(reader.app), ['a', 'c', 'd'], 'a delete')
  await held(reader)
  // The count comes back to what it was: the append's place in its chunk tells the two lists apart.
  await append(writer.app, 'e')
  await remove(writer.app, 'a')
  t.same(await listed(reader.app), ['c', 'd', 'e'], 'an append and a delete that leave the count as it was')
  await held(reader)
  await writer.app.itemStore.reset()
  t.same(await listed(reader.app), [], 'a reset')
})

t.test("a list whose tail chunk was emptied and a new one begun, count and fill as before: only the header's tail moved, and the GET reads it again", async (t) => {
  const reader = await buildService(t)
  const writer = await buildService(t, { redis: reader.redis })
  await clearList(writer.inspector, 'items')
  await writeEarlierList(writer.inspector, 'items', 1_000)
  await writer.app.itemStore.migrate()
  await append(writer.app, 'a')
  await listed(reader.app)
  t.equal((await held(reader)).at(-1), 'a', 'two chunks, one read step: held')
  const before = await reader.inspector.hGetAll('items:header')

  // `a` alone in the tail chunk: deleted, the chunk goes and the next append opens another.
  await remove(writer.app, 'a')
  await append(writer.app, 'b')
  const after = await reader.inspector.hGetAll('items:header')
  t.same({ ...after, tail: before.tail }, before, 'count and fill as before')
  t.not(after.tail, before.tail, 'the tail moved')
  t.equal((await listed(reader.app)).at(-1), 'b', 'read again, not the copy held before')
})

t.test('keys that disagree are refused, held list or not', async (t) => {
  const service = await buildService(t)
  await append(service.app, 'a')
  await held(service)
  const [id] = await service.inspector.zRange('items', 0, 0)
  await service.inspector.zRem('items', id!)
  t.equal((await service.app.inject({ method: 'GET', url: '/items/' })).statusCode, 503, "the index's id gone")

  await service.inspector.zAdd('items', { score: -Infinity, value: id! })
  await held(service)
  await service.inspector.del('items')
  t.equal((await service.app.inject({ method: 'GET', url: '/items/' })).statusCode, 503, 'the index gone')

  // An earlier version appending after the index went: a plain list beside the header.
  await service.inspector.zAdd('items', { score: -Infinity, value: id! })
  await held(service)
  await service.inspector.del('items')
  await service.inspector.rPush('items', 'from an earlier version')
  t.equal((await service.app.inject({ method: 'GET', url: '/items/' })).statusCode, 503, 'a plain list at the key')
  t.match(
    await service.logs.waitFor((line) => line.reason === 'ITEMS_KEY is a plain list beside the header of a chunked list'),
    { msg: "the list's keys disagree: refusing to append, read or delete until they are repaired or the list is reset" },
    'said as any read of such keys says it',
  )
})

t.test('a list read in one step is held, one chunk longer is read whole every time: 8 chunks of 16-byte names, then 9', async (t) => {
  const service = await buildService(t)
  const { app, inspector } = service
  await clearList(inspector, 'items')
  await writeEarlierList(inspector, 'items', 8_000)
  await app.itemStore.migrate()
  // The first read learns how many chunks a step takes; the next two find the same list.
  await listed(app)
  t.equal((await held(service)).length, 8_000, 'eight chunks: held')

  await app.itemStore.append(nameAt(8_000))
  const [reads, checks] = [await sent(app, 'read'), await sent(app, 'held_list')]
  for (let read = 0; read < 4; read++) t.equal((await listed(app)).length, 8_001)
  t.ok((await sent(app, 'read')) - reads >= 8, 'nine chunks: two steps every time')
  t.equal((await sent(app, 'held_list')) - checks, 1, 'one check found the list changed, none since')
  await inspector.configResetStat()
  await listed(app)
  t.ok((await commandCalls(inspector)).lrange! >= 9, 'every chunk read')
})

t.test('a list that changes between reads is read whole, without a check first', async (t) => {
  const service = await buildService(t)
  await append(service.app, 'first')
  await held(service)

  const [checks, reads] = [await sent(service.app, 'held_list'), await sent(service.app, 'read')]
  for (let round = 0; round < 10; round++) {
    await append(service.app, `name ${round}`)
    t.equal((await listed(service.app)).length, round + 2)
  }
  t.equal((await sent(service.app, 'held_list')) - checks, 1, 'the first GET checked and found it changed; none since did')
  t.equal((await sent(service.app, 'read')) - reads, 10, 'each read the list')
})

t.test('a Redis restarted with a list of the same version but other names: the GET answers what Redis holds now', async (t) => {
  const service = await buildService(t)
  const { app, inspector, redis } = service
  for (const name of ['a', 'b']) await append(app, name)
  await held(service)
  const index = await inspector.zRangeWithScores('items', '-inf', '+inf', { BY: 'SCORE' })
  const header = await inspector.hGetAll('items:header')

  // A restart that lost the last writes, then as many others made: the same version, other names.
  await redis.stop()
  await redis.start()
  await inspector.zAdd('items', index)
  await inspector.hSet('items:header', header)
  await inspector.rPush('items:chunk:1', ['x', 'y'])
  t.ok(await eventually(async () => (await app.inject({ method: 'GET', url: '/ready' })).statusCode === 200), 'the app is back')
  t.same(await listed(app), ['x', 'y'])
})
