import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { appendMany, buildService } from '../helpers/service.ts'
import { applyEvents, count, listening, openStream } from '../helpers/event-source.ts'

const { app, inspector, redis: sharedRedis } = await buildService(t, { env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
const base = await listening(app)

const add = (name: string) => app.inject({ method: 'POST', url: '/items/', payload: { name } })
const list = async () => (await app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>().items

t.test('a stream starts with reset, the list as appends and synced, then every change', async (t) => {
  for (const name of ['pear', 'apple', 'pear']) await add(name)
  const stream = await openStream(`${base}/items/events`)
  t.teardown(() => stream.close())
  t.equal(stream.status, 200)
  t.match(stream.headers['content-type'], /^text\/event-stream/)
  await stream.until((events) => count(events, 'synced') === 1)
  t.same(
    stream.events.map(({ event }) => event),
    ['reset', 'append', 'append', 'append', 'synced'],
  )
  t.same(applyEvents(stream.events), ['pear', 'apple', 'pear'])
  const ats = stream.events.filter(({ event }) => event === 'append').map(({ data }) => (data as { at: string }).at)
  t.same([...ats].sort(), ats, 'positions sort in the list order')
  await add('fig')
  await app.inject({ method: 'DELETE', url: '/items/pear' })
  await stream.until((events) => count(events, 'remove') === 1)
  t.same(stream.events.slice(5).map(({ event }) => event), ['append', 'remove'])
  t.same((stream.events.at(-1)!.data as { at: string[] }).at, [ats[0], ats[2]], 'a remove names the positions the delete removed')
  t.same(applyEvents(stream.events), await list())
  t.ok(stream.events.every(({ id }) => id !== ''), 'every event has an id')
})

t.test('an empty list is reset then synced', async (t) => {
  const stream = await openStream(`${base}/items/events`)
  t.teardown(() => stream.close())
  await stream.until((events) => count(events, 'synced') === 1)
  t.same(stream.events.map(({ event }) => event), ['reset', 'synced'])
})

/** The last event's id: where a client resumes. */
const lastId = (events: readonly { id: string }[]) => events.at(-1)!.id

t.test('appends and deletes from two replicas, a name deleted while others append it: every copy equals the list at rest', async (t) => {
  const other = await buildService(t, { redis: sharedRedis, env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
  const otherBase = await listening(other.app)
  for (let index = 0; index < 50; index++) await add(index % 5 === 0 ? 'x' : `n${index}`)
  const early = await openStream(`${base}/items/events`)
  t.teardown(() => early.close())
  const writes: Promise<unknown>[] = []
  let late: Awaited<ReturnType<typeof openStream>> | undefined
  for (let round = 0; round < 20; round++) {
    for (let index = 0; index < 20; index++) {
      const target = index % 2 === 0 ? app : other.app
      writes.push(target.inject({ method: 'POST', url: '/items/', payload: { name: index % 4 === 0 ? 'x' : `r${round}-${index}` } }))
    }
    writes.push(other.app.inject({ method: 'DELETE', url: '/items/x' }))
    writes.push(app.inject({ method: 'DELETE', url: `/items/r${round - 1}-1` }))
    // A stream opened on the other replica while the writes go on: its snapshot is read under them.
    if (round === 5) late = await openStream(`${otherBase}/items/events`)
    await new Promise((resolve) => setImmediate(resolve))
  }
  await Promise.all(writes)
  t.teardown(() => late?.close())
  const expected = await list()
  t.same(expected, await other.storedItems())
  for (const [which, stream] of [['early', early], ['late', late!]] as const) {
    await stream.until((events) => count(events, 'synced') === 1 && applyEvents(events).length === expected.length && applyEvents(events).join() === expected.join())
    t.same(applyEvents(stream.events), expected, `${which}: the copy equals the list`)
    t.equal(count(stream.events, 'reset'), 1, `${which}: one snapshot`)
  }
})

t.test('a snapshot read in many steps while names are appended and deleted: no change missed nor doubled', async (t) => {
  // 12 chunks: a snapshot of three steps or more, each read with the stream's id of its moment.
  await appendMany(app, 12_000, (index) => (index % 10 === 0 ? 'y' : `m${index}`))
  const stream = await openStream(`${base}/items/events`)
  t.teardown(() => stream.close())
  for (let round = 0; round < 40; round++) {
    await Promise.all([add(`w${round}`), add('y'), round % 8 === 3 ? app.inject({ method: 'DELETE', url: '/items/y' }) : undefined])
  }
  const expected = await list()
  await stream.until((events) => count(events, 'synced') === 1 && applyEvents(events).join() === expected.join(), 30_000)
  t.same(applyEvents(stream.events), expected)
})

t.test('a resume with Last-Event-ID or ?lastEventId= sends exactly the events missed', async (t) => {
  for (const name of ['pear', 'apple', 'pear']) await add(name)
  const first = await openStream(`${base}/items/events`)
  await first.until((events) => count(events, 'synced') === 1)
  first.close()
  const from = lastId(first.events)
  await add('fig')
  await add('kiwi')
  await app.inject({ method: 'DELETE', url: '/items/pear' })
  const ways = [() => openStream(`${base}/items/events`, { 'last-event-id': from }), () => openStream(`${base}/items/events?lastEventId=${encodeURIComponent(from)}`)]
  let resumed!: Awaited<ReturnType<typeof openStream>>
  for (const open of ways) {
    resumed = await open()
    t.teardown(() => resumed.close())
    await resumed.until((events) => count(events, 'remove') === 1)
    t.same(
      resumed.events.map(({ event, data }) => [event, event === 'append' ? (data as { name: string }).name : data]),
      [
        ['append', 'fig'],
        ['append', 'kiwi'],
        ['remove', { at: [(first.events[1]!.data as { at: string }).at, (first.events[3]!.data as { at: string }).at] }],
      ],
    )
    t.same(applyEvents([...first.events, ...resumed.events]), await list())
    resumed.close()
  }
  // Resumed again from its own last id: nothing more, nothing twice.
  const again = await openStream(`${base}/items/events`, { 'last-event-id': lastId(resumed.events) })
  t.teardown(() => again.close())
  await add('plum')
  await again.until((events) => events.length >= 1)
  t.same(again.events.map(({ event, data }) => [event, (data as { name?: string }).name]), [['append', 'plum']])
})

t.test('a resume point of a list since reset, or not an id of ours, gets reset, snapshot, synced', async (t) => {
  await add('old')
  const first = await openStream(`${base}/items/events`)
  await first.until((events) => count(events, 'synced') === 1)
  await app.itemStore.reset()
  // The live stream: reset, and the new (empty) list's snapshot.
  await first.until((events) => count(events, 'synced') === 2)
  t.same(first.events.slice(3).map(({ event }) => event), ['reset', 'synced'])
  first.close()
  await add('new')
  for (const id of [first.events[2]!.id, 'nonsense', first.events[0]!.id]) {
    const resumed = await openStream(`${base}/items/events`, { 'last-event-id': id })
    t.teardown(() => resumed.close())
    await resumed.until((events) => count(events, 'synced') === 1)
    t.same(resumed.events.map(({ event }) => event), ['reset', 'append', 'synced'], id)
    t.same(applyEvents(resumed.events), ['new'])
  }
})

t.test('every change has its event and every event its change: the stream replayed is the list', async (t) => {
  for (const name of ['a', 'b', 'a', 'c']) await add(name)
  await app.inject({ method: 'DELETE', url: '/items/a' })
  await app.inject({ method: 'DELETE', url: '/items/missing' })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'd' }, headers: { 'idempotency-key': 'once' } })
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'd' }, headers: { 'idempotency-key': 'once' } })
  t.same(await replayedStream(), await list())
})

t.test('ETag on the whole list: If-None-Match answers 304 until it changes; a page has none', async (t) => {
  await add('a')
  const first = await app.inject({ method: 'GET', url: '/items/' })
  const etag = first.headers.etag as string
  t.match(etag, /^W\/"[^" ]+"$/)
  const again = await app.inject({ method: 'GET', url: '/items/', headers: { 'if-none-match': etag } })
  t.equal(again.statusCode, 304)
  t.equal(again.body, '')
  t.equal(again.headers.etag, etag)
  t.equal((await app.inject({ method: 'GET', url: '/items/', headers: { 'if-none-match': `"other", ${etag}` } })).statusCode, 304)
  t.equal((await app.inject({ method: 'GET', url: '/items/?limit=1' })).headers.etag, undefined)
  await add('b')
  const changed = await app.inject({ method: 'GET', url: '/items/', headers: { 'if-none-match': etag } })
  t.equal(changed.statusCode, 200)
  t.same(changed.json(), { items: ['a', 'b'] })
  t.not(changed.headers.etag, etag)
  await app.inject({ method: 'DELETE', url: '/items/b' })
  t.equal((await app.inject({ method: 'GET', url: '/items/', headers: { 'if-none-match': changed.headers.etag as string } })).statusCode, 200, 'a delete changes it too')
})

t.test('the OpenAPI document describes the route', async (t) => {
  const document = (await app.inject({ method: 'GET', url: '/docs/json' })).json<{ paths: Record<string, { get?: { summary?: string } }> }>()
  t.match(document.paths['/items/events']?.get?.summary, /Server-Sent Events/)
})

/** The list rebuilt from the events stream alone, from its first entry. */
async function replayedStream(): Promise<string[]> {
  const copy = new Map<string, string>()
  for (const { message } of (await inspector.xRange('items:events', '-', '+')) ?? []) {
    const { t: type, ...pairs } = message as Record<string, string>
    if (type === 'z' || type === 'm') copy.clear()
    for (const [at, name] of Object.entries(pairs)) {
      if (type === 'a') copy.set(at, name)
      if (type === 'r') copy.delete(at)
    }
  }
  return [...copy.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, name]) => name)
}
