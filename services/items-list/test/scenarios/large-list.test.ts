import t from 'tap'
import { createHash } from 'node:crypto'
import { request } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { buildService, nameAt, writeEarlierList } from '../helpers/service.ts'

// A list far longer than one Redis command may read: a million names of 16 bytes (19 MB), more
// than one `LRANGE 0 -1` answers within the 500 ms deadline (a single read of it answered 503).

const MILLION = 1_000_000
// Room for the million and what the tests append to it.
const { app, inspector, logs, storedItems } = await buildService(t, { env: { ITEMS_MAX_COUNT: String(2 * MILLION) } })

/** A million names in chunks, as any list is once an earlier version's has been moved in. */
async function millionNames(): Promise<void> {
  await writeEarlierList(inspector, 'items', MILLION)
  await app.itemStore.migrate()
}

/** The app's port, listening on the loopback from the first call: for what needs a real client. */
async function port(): Promise<number> {
  if (!app.server.listening) await app.listen({ host: '127.0.0.1', port: 0 })
  return (app.server.address() as AddressInfo).port
}

/** `items_store_commands_total{command}` summed over outcomes, from the app's own /metrics. */
async function commandsSent(command: string): Promise<number> {
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  let total = 0
  for (const [, value] of page.matchAll(new RegExp(`^items_store_commands_total\\{command="${command}",outcome="\\w+"\\} (\\d+)$`, 'gm'))) total += Number(value)
  return total
}

t.test('a million names are answered 200, whole and in order, and appends made while they are read all answer 201', async (t) => {
  await millionNames()
  const reading = app.inject({ method: 'GET', url: '/items/' })
  const appends = []
  for (let index = 0; index < 50; index++) appends.push(await app.inject({ method: 'POST', url: '/items/', payload: { name: `during ${index}` } }))
  const res = await reading

  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  t.same(new Set(appends.map((append) => append.statusCode)), new Set([201]), 'every append during the read answered 201')
  const { items } = res.json<{ items: string[] }>()
  t.ok(items.slice(0, MILLION).every((name, index) => name === nameAt(index)), 'the million names, in order')
  const appended = items.slice(MILLION)
  t.same(appended, appends.map((_, index) => `during ${index}`).slice(0, appended.length), 'then, perhaps, some of the appends made meanwhile, in order')
})

t.test('no Redis command of a full read or a delete of a million names runs 50 ms: Redis answers everyone meanwhile', async (t) => {
  await millionNames()
  await inspector.configSet('slowlog-log-slower-than', '50000')
  await inspector.sendCommand(['SLOWLOG', 'RESET'])
  t.teardown(() => inspector.configSet('slowlog-log-slower-than', '10000'))

  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  t.equal((await app.inject({ method: 'DELETE', url: `/items/${nameAt(MILLION - 1)}` })).statusCode, 200)
  t.equal((await app.inject({ method: 'DELETE', url: '/items/absent' })).statusCode, 404)
  // What Redis itself timed; the test's own commands are small.
  t.same(await inspector.sendCommand(['SLOWLOG', 'GET', '10']), [])
})

t.test('DELETE at a million names removes every occurrence wherever it is, and answers 404 when there is none', async (t) => {
  await millionNames()
  const doomed = nameAt(500_000)
  await app.inject({ method: 'POST', url: '/items/', payload: { name: doomed } })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: nameAt(0) } })

  t.equal((await app.inject({ method: 'DELETE', url: `/items/${doomed}` })).statusCode, 200)
  t.equal((await app.inject({ method: 'DELETE', url: `/items/${nameAt(0)}` })).statusCode, 200)
  t.equal((await app.inject({ method: 'DELETE', url: `/items/${doomed}` })).statusCode, 404)
  const stored = await storedItems()
  t.equal(stored.length, MILLION - 2)
  t.notOk(stored.includes(doomed) || stored.includes(nameAt(0)), 'no occurrence left, at the head, the middle or the tail')
  t.same((await app.inject({ method: 'GET', url: '/items/?limit=2' })).json(), { items: [nameAt(1), nameAt(2)] })
})

t.test('concurrent deletes of one name in a million: exactly one 200, though each takes many steps', async (t) => {
  await millionNames()
  const doomed = nameAt(MILLION / 2)
  await app.inject({ method: 'POST', url: '/items/', payload: { name: doomed } })
  const statuses = (await Promise.all(Array.from({ length: 4 }, () => app.inject({ method: 'DELETE', url: `/items/${doomed}` })))).map((res) => res.statusCode)
  t.same(statuses.toSorted(), [200, 404, 404, 404])
  t.ok((await commandsSent('remove_step')) > 4 * 4, 'each took several steps')
})

t.test('appends of a name while a delete of it runs are each removed or kept whole, and the count stays true', async (t) => {
  await millionNames()
  const name = nameAt(10)
  const deleting = app.inject({ method: 'DELETE', url: `/items/${name}` })
  const appends = await Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'POST', url: '/items/', payload: { name } })))
  t.equal((await deleting).statusCode, 200)
  t.same(new Set(appends.map((res) => res.statusCode)), new Set([201]))

  const stored = await storedItems()
  const left = stored.filter((each) => each === name).length
  t.ok(left <= 20, `${left} of the 20 appends kept, the others removed by the delete`)
  t.equal(stored.length, MILLION - 1 + left, 'nothing else changed')
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(page, new RegExp(`^items_list_names ${stored.length}$`, 'm'), 'the list’s count is the names it holds')
})

/** The lock a delete of `name` takes while it needs more than one step. */
const lockOf = (name: string) => `items:deleting:${createHash('sha256').update(name).digest('base64url')}`

t.test('a delete of a name that another delete holds waits for it to let go, then runs', async (t) => {
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'held' } })
  await inspector.set(lockOf('held'), 'another delete', { PX: 300 })
  const res = await app.inject({ method: 'DELETE', url: '/items/held' })
  t.equal(res.statusCode, 200)
  t.equal(await inspector.exists(lockOf('held')), 0, 'the lock had expired')
  t.same(await storedItems(), [])
})

t.test('a delete gives up on a name another delete holds for more than 5 s: 503, nothing removed', async (t) => {
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'held' } })
  await inspector.set(lockOf('held'), 'a delete gone astray', { PX: 60_000 })
  const res = await app.inject({ method: 'DELETE', url: '/items/held' })
  t.equal(res.statusCode, 503)
  t.same(res.json(), { detail: 'Item store unavailable' })
  t.same(await storedItems(), ['held'])
})

t.test('a client that goes away mid-answer stops the reading: no read step runs for it afterwards', async (t) => {
  await millionNames()
  const before = await commandsSent('read')

  const req = request({ host: '127.0.0.1', port: await port(), path: '/items/', headers: { 'x-request-id': 'goes-away' } })
  req.end()
  const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream]
  await once(res, 'data')
  req.destroy()
  await logs.waitFor((line) => line.reqId === 'goes-away' && line.msg !== 'incoming request')
  // Commands are answered in order on the store's connection: once /ready has its answer, a read
  // step sent before it has had its own.
  await app.inject({ method: 'GET', url: '/ready' })
  const read = (await commandsSent('read')) - before
  await app.inject({ method: 'GET', url: '/ready' })

  t.equal((await commandsSent('read')) - before, read, 'no step since')
  // A million names take 125 steps of 8,000; a client gone after its first bytes, a few.
  t.ok(read < 40, `${read} steps read for it`)
})

t.test('a full read over the wire, held back by its client, gives every name present throughout once, in order, while others delete names it has sent and append', async (t) => {
  await millionNames()
  const req = request({ host: '127.0.0.1', port: await port(), path: '/items/' })
  req.end()
  const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream]
  const chunks: Buffer[] = []
  res.on('data', (chunk: Buffer) => chunks.push(chunk))
  await once(res, 'data')
  // The client stops reading: the service, a few megabytes on at most, waits for it.
  res.pause()
  const deleted = Array.from({ length: 100 }, (_, index) => nameAt(index * 10))
  for (const name of deleted) {
    if ((await app.inject({ method: 'DELETE', url: `/items/${name}` })).statusCode !== 200) throw new Error(`${name} was not deleted`)
  }
  for (let index = 0; index < 10; index++) await app.inject({ method: 'POST', url: '/items/', payload: { name: `appended ${index}` } })
  res.resume()
  await once(res, 'end')

  const { items } = JSON.parse(Buffer.concat(chunks).toString()) as { items: string[] }
  const gone = new Set(deleted)
  const throughout = items.filter((name) => name.startsWith('s-') && !gone.has(name))
  t.equal(throughout.length, MILLION - deleted.length, 'none skipped')
  t.ok(
    throughout.every((name, index, names) => index === 0 || name > names[index - 1]!),
    'in order, none twice',
  )
})

t.test('a list whose first chunks went whole is read whole, though the last read knew other chunks', async (t) => {
  // A first chunk of one name only, deleted in one go: the chunk goes, the next is the first.
  await app.itemStore.append('gone')
  for (let index = 0; index < 999; index++) await app.itemStore.append('gone')
  for (let index = 0; index < 2_500; index++) await app.itemStore.append(nameAt(index))
  t.equal((await app.inject({ method: 'GET', url: '/items/?limit=1' })).json<{ items: string[] }>().items[0], 'gone')
  t.equal((await app.inject({ method: 'DELETE', url: '/items/gone' })).statusCode, 200)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: Array.from({ length: 2_500 }, (_, index) => nameAt(index)) })
})

t.test('HEAD /items/ of a long list answers the GET’s status and headers without reading the list', async (t) => {
  await writeEarlierList(inspector, 'items', 100_000)
  await app.itemStore.migrate()
  const before = await commandsSent('read')
  const res = await app.inject({ method: 'HEAD', url: '/items/' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  t.equal(res.body, '')
  t.ok((await commandsSent('read')) - before <= 2, 'the first steps only')
})
