import t from 'tap'
import { PassThrough } from 'node:stream'
import { createEventStream, parseEventId, type SnapshotReason } from '../../src/http/event-stream.ts'
import { position } from '../../src/store/events-emit.ts'
import type { FeedEntry, FeedReads, FeedState } from '../../src/store/change-feed.ts'

// One stream against reads made up for it: the paths a live Redis reaches only by a race.

const STATE: FeedState = { listId: 'L', legacy: false, last: '5-0', maxDeleted: '0-0' }
const append = (id: string, name: string, chunk = 1, offset = 0): FeedEntry => ({ id, type: 'a', pairs: [[position(chunk, offset), name]] })

/** XRANGE over `log` (ids `<n>-0`, n from 1): from an id included, or after one ('(' first). */
const rangeOf = (log: FeedEntry[]) => async (from: string, count: number) => {
  const start = from.startsWith('(') ? Number(from.slice(1).split('-')[0]) + 1 : Number(from.split('-')[0])
  return log.slice(start - 1, start - 1 + count)
}

function streamOf(reads: Partial<FeedReads>, lastEventId: string | undefined) {
  const sink = new PassThrough()
  let text = ''
  sink.on('data', (chunk: Buffer) => (text += chunk.toString()))
  const snapshots: SnapshotReason[] = []
  const reports = { sent: () => {}, resumed: () => {}, snapshot: (reason: SnapshotReason) => snapshots.push(reason), slow: () => {} }
  const stream = createEventStream(sink, lastEventId, { reads: { state: async () => STATE, ...reads } as FeedReads, bufferBytes: 1 << 20, reports, cut: () => {} })
  return { stream, snapshots, text: () => text }
}

/** The reasons of the first `count` snapshots a stream over `reads` starts, once it has started them. */
async function snapshotsOf(reads: Partial<FeedReads>, lastEventId: string | undefined, count: number): Promise<SnapshotReason[]> {
  const { stream, snapshots } = streamOf(reads, lastEventId)
  const running = stream.run()
  for (let tries = 0; tries < 1000 && snapshots.length < count; tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  return snapshots.slice(0, count)
}

t.test('a reset met while catching up after a resume starts the stream again with a snapshot', async (t) => {
  let snapshotted = false
  const { stream, snapshots, text } = streamOf(
    {
      range: rangeOf([append('1-0', 'a'), { id: '2-0', type: 'z', pairs: [] }]),
      snapshotStep: async () => {
        snapshotted = true
        return { ...STATE, last: '2-0', segments: [], next: undefined }
      },
    },
    'L.1-0',
  )
  const running = stream.run()
  for (let tries = 0; tries < 100 && !snapshotted; tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  t.same(snapshots, ['reset'])
  t.match(text(), /event: reset/)
})

t.test('a catch-up reads on past a full range, each entry once', async (t) => {
  const entries = Array.from({ length: 450 }, (_, index) => append(`${index + 1}-0`, `n${index}`, 1 + Math.floor(index / 1000), index % 1000))
  const { stream, text } = streamOf(
    {
      state: async () => ({ ...STATE, last: '450-0' }),
      range: rangeOf(entries),
    },
    'L.1-0',
  )
  const running = stream.run()
  for (let tries = 0; tries < 1000 && !text().includes('"n449"'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  t.equal(text().match(/event: append/g)?.length, 449)
})

t.test('a snapshot of several steps sends a change between them only where the step holding it was read before it', async (t) => {
  const steps = [
    { ...STATE, last: '1-0', segments: [{ chunk: 1, offset: 0, entries: ['a'] }], next: 2 },
    { ...STATE, last: '3-0', segments: [{ chunk: 2, offset: 0, entries: ['b', 'c'] }], next: undefined },
  ]
  // 2-0 appends c at chunk 2 (read by the second step, after it: not sent again); 3-0 removes a
  // (the first step read it before: sent), 4-0 appends d after the snapshot.
  const log: FeedEntry[] = [
    { id: '1-0', type: 'a', pairs: [[position(1, 0), 'a']] },
    append('2-0', 'c', 2, 1),
    { id: '3-0', type: 'r', pairs: [[position(1, 0), '']] },
    append('4-0', 'd', 2, 2),
  ]
  const { stream, text } = streamOf(
    {
      snapshotStep: async (chunk) => steps[chunk - 1]!,
      range: rangeOf(log),
    },
    undefined,
  )
  const running = stream.run()
  for (let tries = 0; tries < 1000 && !text().includes('"d"'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  const events = [...text().matchAll(/event: (\w+)\ndata: (.*)\n/g)].map(([, event, data]) => `${event} ${data}`)
  t.same(events, [
    'reset {}',
    `append {"name":"a","at":"${position(1, 0)}"}`,
    `append {"name":"b","at":"${position(2, 0)}"}`,
    `append {"name":"c","at":"${position(2, 1)}"}`,
    `remove {"at":["${position(1, 0)}"]}`,
    'synced {}',
    `append {"name":"d","at":"${position(2, 2)}"}`,
  ])
})

t.test('an event id is the list and the entry, and the event within it; anything else resumes nothing', async (t) => {
  t.same(parseEventId('L.1-0'), { listId: 'L', entry: '1-0', through: undefined })
  t.same(parseEventId('L.1-0.3'), { listId: 'L', entry: '1-0', through: 3 })
  t.equal(parseEventId('L.s3'), undefined)
  t.equal(parseEventId(undefined), undefined)
})

t.test('a list replaced between two snapshot steps starts the snapshot again', async (t) => {
  let calls = 0
  const reads = {
    snapshotStep: async () => {
      calls++
      if (calls === 1) return { ...STATE, last: '0-0', segments: [{ chunk: 1, offset: 0, entries: ['a'] }], next: 2 }
      return { ...STATE, listId: 'M', last: '0-0', segments: [], next: undefined }
    },
    range: rangeOf([]),
  }
  t.same(await snapshotsOf(reads, undefined, 2), ['no_id', 'reset'])
})

t.test('a stream ended while it waits for its client to take a frame stops there', async (t) => {
  // Nobody reads this sink: its buffer fills, and the snapshot waits.
  const sink = new PassThrough({ highWaterMark: 16 })
  const reports = { sent: () => {}, resumed: () => {}, snapshot: () => {}, slow: () => {} }
  const reads = { state: async () => STATE, snapshotStep: async () => ({ ...STATE, segments: [{ chunk: 1, offset: 0, entries: ['a', 'b'] }], next: undefined }), range: rangeOf([]) }
  const stream = createEventStream(sink, undefined, { reads, bufferBytes: 1 << 20, reports, cut: () => {} })
  const running = stream.run()
  for (let tries = 0; tries < 100 && sink.writableLength === 0; tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  t.ok(sink.writableEnded)
})

t.test("a resume point is refused for another list, past the stream's end, or trimmed; a point inside an entry sends the rest of it", async (t) => {
  const reasonOf = async (id: string, state: Partial<FeedState>) =>
    (await snapshotsOf({ state: async () => ({ ...STATE, ...state }), snapshotStep: async () => ({ ...STATE, last: '0-0', segments: [], next: undefined }), range: rangeOf([]) }, id, 1))[0]
  t.equal(await reasonOf('X.1-0', {}), 'reset')
  t.equal(await reasonOf('L.9-0', {}), 'failover')
  t.equal(await reasonOf('L.0-0', { maxDeleted: '3-0' }), 'too_old')
  t.equal(await reasonOf('L.2-0', { maxDeleted: '2-0' }), 'too_old')

  const pair: FeedEntry = { id: '1-0', type: 'a', pairs: [[position(1, 0), 'a'], [position(1, 1), 'b'], [position(1, 2), 'c']] }
  const { stream, text } = streamOf({ range: rangeOf([pair, append('2-0', 'd', 1, 3)]) }, 'L.1-0.0')
  const running = stream.run()
  for (let tries = 0; tries < 1000 && !text().includes('"d"'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.listener.entry(append('3-0', 'e', 1, 4))
  for (let tries = 0; tries < 1000 && !text().includes('"e"'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  stream.listener.entry(append('4-0', 'f', 1, 5))
  await running
  t.same([...text().matchAll(/id: (\S+)\nevent: append\ndata: .*"name":"(\w)"/g)].map(([, id, name]) => `${id} ${name}`), ['L.1-0.1 b', 'L.1-0 c', 'L.2-0 d', 'L.3-0 e'])
})

t.test('a stream ended while a snapshot step is read stops there', async (t) => {
  const holder: { stream?: ReturnType<typeof createEventStream> } = {}
  const made = streamOf(
    {
      snapshotStep: async () => {
        holder.stream!.end()
        return { ...STATE, segments: [], next: undefined }
      },
    },
    undefined,
  )
  holder.stream = made.stream
  await made.stream.run()
  t.equal(made.text(), '')
})

t.test('an append made after the step that holds its position was read is sent before synced', async (t) => {
  const steps = [
    { ...STATE, last: '1-0', segments: [{ chunk: 1, offset: 0, entries: ['a'] }], next: 2 },
    { ...STATE, last: '2-0', segments: [{ chunk: 2, offset: 0, entries: ['b'] }], next: undefined },
  ]
  const { stream, text } = streamOf({ snapshotStep: async (chunk) => steps[chunk - 1]!, range: rangeOf([append('1-0', 'a'), append('2-0', 'x', 1, 1)]) }, undefined)
  const running = stream.run()
  for (let tries = 0; tries < 1000 && !text().includes('synced'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  const events = [...text().matchAll(/id: (\S+)\nevent: (\w+)\ndata: (.*)\n/g)].map(([, id, event, data]) => `${id} ${event} ${data}`)
  t.same(events, [
    'L.s0 reset {}',
    `L.s1 append {"name":"a","at":"${position(1, 0)}"}`,
    `L.s2 append {"name":"b","at":"${position(2, 0)}"}`,
    `L.s3 append {"name":"x","at":"${position(1, 1)}"}`,
    'L.2-0 synced {}',
  ])
})

t.test('a list replaced between two snapshot steps, seen in the changes between them, starts the snapshot again', async (t) => {
  // The first snapshot's steps, then one step read after the replacement.
  const steps = [
    { ...STATE, last: '1-0', segments: [{ chunk: 1, offset: 0, entries: ['a'] }], next: 2 },
    { ...STATE, last: '3-0', segments: [], next: undefined },
  ]
  let calls = 0
  const reads = {
    snapshotStep: async () => steps[calls++] ?? { ...STATE, last: '3-0', segments: [], next: undefined },
    range: rangeOf([append('1-0', 'a'), { id: '2-0', type: 'z', pairs: [] }, append('3-0', 'y', 2, 0)]),
  }
  t.same(await snapshotsOf(reads, undefined, 2), ['no_id', 'reset'])
})

t.test('a list gone (no header) is another list: for a resume point, and between two snapshot steps', async (t) => {
  const noList = { ...STATE, listId: undefined }
  const gone = { state: async () => noList, snapshotStep: async () => ({ ...noList, last: '0-0', segments: [], next: undefined }), range: rangeOf([]) }
  t.same(await snapshotsOf(gone, 'L.1-0', 1), ['reset'], 'a point of list L, when there is no list')

  let calls = 0
  const goneAfterOneStep = {
    snapshotStep: async () => (++calls === 1 ? { ...STATE, last: '0-0', segments: [], next: 2 } : { ...noList, last: '0-0', segments: [], next: undefined }),
    range: rangeOf([]),
  }
  t.same(await snapshotsOf(goneAfterOneStep, undefined, 2), ['no_id', 'reset'], 'the list gone after the first step')
})

t.test('a resume point inside a remove (one event: no id names a part of it) sends none of it again', async (t) => {
  const removal: FeedEntry = { id: '1-0', type: 'r', pairs: [[position(1, 0), ''], [position(1, 1), '']] }
  const { stream, text } = streamOf({ range: rangeOf([removal, append('2-0', 'd', 1, 2)]) }, 'L.1-0.0')
  const running = stream.run()
  for (let tries = 0; tries < 1000 && !text().includes('"d"'); tries++) await new Promise((resolve) => setImmediate(resolve))
  stream.end()
  await running
  t.same([...text().matchAll(/id: (\S+)\nevent: (\w+)/g)].map(([, id, event]) => `${id} ${event}`), ['L.2-0 append'])
})

t.test("one entry handed to streams of two lists is sent to each with its own list's ids", async (t) => {
  const entry = append('2-0', 'e', 1, 1)
  const streams = ['L', 'M', 'L'].map((listId) => streamOf({ state: async () => ({ ...STATE, listId }), range: rangeOf([append('1-0', 'a')]) }, `${listId}.1-0`))
  const runs = streams.map(({ stream }) => stream.run())
  await new Promise((resolve) => setImmediate(resolve))
  for (const { stream } of streams) stream.listener.entry(entry)
  for (let tries = 0; tries < 1000 && !streams.every(({ text }) => text().includes('"e"')); tries++) await new Promise((resolve) => setImmediate(resolve))
  for (const { stream } of streams) stream.end()
  await Promise.all(runs)
  t.same(
    streams.map(({ text }) => /id: (\S+)\nevent: append/.exec(text())?.[1]),
    ['L.2-0', 'M.2-0', 'L.2-0'],
  )
})
