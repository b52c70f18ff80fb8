import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'
import { applyEvents, count, listening, openStream } from '../helpers/event-source.ts'

// Small bounds, so that each is reached in a test: a stream trimmed past 100 events, a watcher's
// queue of 1 KiB, one stream a replica, a list of 3 names.
const { app, inspector, storedItems } = await buildService(t, {
  env: {
    REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS),
    ITEMS_EVENTS_KEPT: '100',
    ITEMS_EVENTS_BUFFER_BYTES: '1024',
    ITEMS_EVENTS_MAX_STREAMS: '1',
    ITEMS_MAX_COUNT: '3000',
  },
})
const base = await listening(app)
const add = (name: string) => app.inject({ method: 'POST', url: '/items/', payload: { name } })
const metric = async (line: RegExp) => {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  return Number(line.exec(text)?.[1] ?? Number.NaN)
}
/** Resolves once no stream is open on the replica (the last one's close has been seen). */
const untilNoStream = async () => {
  for (let tries = 0; tries < 100 && (await metric(/^items_events_streams_open (\d+)/m)) !== 0; tries++) await new Promise((resolve) => setTimeout(resolve, 20))
}

t.test('past ITEMS_EVENTS_MAX_STREAMS a replica answers 503 with a detail', async (t) => {
  const open = await openStream(`${base}/items/events`)
  await open.until((events) => count(events, 'synced') === 1)
  const refused = await openStream(`${base}/items/events`)
  t.equal(refused.status, 503)
  await refused.ended
  t.match(JSON.parse(refused.text()), { detail: /1 event streams open/ })
  open.close()
  await untilNoStream()
  const next = await openStream(`${base}/items/events`)
  t.equal(next.status, 200, 'a closed stream frees its place')
  next.close()
  await untilNoStream()
})

t.test('a resume point trimmed away gets reset, snapshot, synced', async (t) => {
  await add('first')
  const first = await openStream(`${base}/items/events`)
  await first.until((events) => count(events, 'synced') === 1)
  first.close()
  await untilNoStream()
  // One at a time: each append its own entry, so that MAXLEN ~ 100 trims past the resume point.
  for (let index = 0; index < 300; index++) await add(`n${index}`)
  const before = await metric(/^items_events_snapshots_total\{reason="too_old"\} (\d+)/m)
  const resumed = await openStream(`${base}/items/events`, { 'last-event-id': first.events.at(-1)!.id })
  t.teardown(() => resumed.close())
  await resumed.until((events) => count(events, 'synced') === 1)
  t.equal(resumed.events[0]!.event, 'reset')
  t.same(applyEvents(resumed.events), await storedItems())
  t.equal(await metric(/^items_events_snapshots_total\{reason="too_old"\} (\d+)/m), before + 1)
  t.ok((await inspector.xLen('items:events')) < 300, 'the stream is trimmed')
  resumed.close()
  await untilNoStream()
})

t.test('an append refused at the cap (507) writes no event', async (t) => {
  // Filled without the HTTP route's limit on a test's time: 3000 names in groups.
  await Promise.all(Array.from({ length: 3000 }, (_, index) => app.itemStore.append(`f${index}`)))
  const stream = await inspector.xLen('items:events')
  const last = (await inspector.xRevRange('items:events', '+', '-', { COUNT: 1 }))?.[0]!.id
  t.equal((await add('one too many')).statusCode, 507)
  t.equal(await inspector.xLen('items:events'), stream)
  t.equal((await inspector.xRevRange('items:events', '+', '-', { COUNT: 1 }))?.[0]!.id, last)
  // And a stream opened now holds the list exactly: no event of the refused append.
  const watcher = await openStream(`${base}/items/events`)
  t.teardown(() => watcher.close())
  await watcher.until((events) => count(events, 'synced') === 1)
  t.same(applyEvents(watcher.events), await storedItems())
  watcher.close()
  await untilNoStream()
})

t.test('a watcher that stops reading is ended past ITEMS_EVENTS_BUFFER_BYTES', async (t) => {
  const watcher = await openStream(`${base}/items/events`)
  await watcher.until((events) => count(events, 'synced') === 1)
  // The client reads nothing more: the kernel's buffers fill, then the replica's queue.
  watcher.response.pause()
  const before = await metric(/^items_events_slow_ended_total (\d+)/m)
  const name = (index: number) => `${String(index).padStart(6, '0')}${'x'.repeat(1000)}`
  let appended = 0
  const ended = watcher.ended.then(() => true)
  while (appended < 2900 && !(await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve(false), 0))]))) {
    await Promise.all(Array.from({ length: 100 }, (_, offset) => app.itemStore.append(name(appended + offset))))
    appended += 100
    // The store's cap holds the list to 3000: make room.
    if (appended % 1000 === 0) await app.itemStore.reset()
  }
  t.ok(await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve(false), 5_000))]), 'the stream was ended')
  t.equal(await metric(/^items_events_slow_ended_total (\d+)/m), before + 1)
  await untilNoStream()
  t.equal(await metric(/^items_events_streams_open (\d+)/m), 0)
})

t.test('when the app closes (after the drain) its streams end, and a client resumes elsewhere', async (t) => {
  const watcher = await openStream(`${base}/items/events`)
  await watcher.until((events) => count(events, 'synced') === 1)
  const closing = app.close()
  t.ok(await Promise.race([watcher.ended.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 5_000))]), 'the stream ended')
  await closing
})
