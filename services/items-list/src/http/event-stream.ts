// One watcher's Server-Sent Events stream of the list (docs/events.md): where it starts (a resume
// or a snapshot), the events it is sent, in order and once each, and its bound on memory.
import { once } from 'node:events'
import type { PassThrough } from 'node:stream'
import { position } from '../store/events-emit.ts'
import { EVENT_MOVED, EVENT_REMOVE, EVENT_RESET } from '../store/events-emit.ts'
import { compareIds, type FeedEntry, type FeedListener, type FeedReads } from '../store/change-feed.ts'
import { isTombstone } from '../store/layout.ts'

/** Why a stream starts with a snapshot: no (usable) id, a point trimmed away, the list replaced or moved in, Redis lost events. */
export type SnapshotReason = 'no_id' | 'too_old' | 'reset' | 'failover'

/** What a stream reports, for the metrics. */
export interface StreamReports {
  sent(type: 'reset' | 'append' | 'remove' | 'synced', count: number): void
  resumed(): void
  snapshot(reason: SnapshotReason): void
  slow(): void
}

/** A resume point: the list, the stream entry, and how many of the entry's events came (all, when undefined). */
interface ResumePoint {
  listId: string
  entry: string
  through: number | undefined
}

/** The list id a stream names while there is no list (no list id is this short). */
const NO_LIST = '0'
/** Entries read per round trip when catching up. */
const RANGE_COUNT = 200
/** What a queued entry is counted as beside its names and positions. */
const ENTRY_OVERHEAD_BYTES = 64

/**
 * A live entry's frames, made once per replica and list for all its streams: every stream in step
 * with the reader sends an entry whole, with the same ids.
 */
const framesOfEntries = new WeakMap<FeedEntry, Map<string, { frames: string; events: number }>>()

/** The frames of all of `entry`'s events, as a stream of list `listId` sends them live. */
function framesOf(entry: FeedEntry, listId: string): { frames: string; events: number } {
  const byList = framesOfEntries.get(entry) ?? new Map<string, { frames: string; events: number }>()
  framesOfEntries.set(entry, byList)
  const made = byList.get(listId) ?? framesFrom(entry, 0, liveIds(entry, listId))
  byList.set(listId, made)
  return made
}

/** An entry's event ids as sent live: the entry's own on its last event, `.<n>` on those before. */
function liveIds(entry: FeedEntry, listId: string): (index: number, last: boolean) => string {
  return (index, last) => (last ? `${listId}.${entry.id}` : `${listId}.${entry.id}.${index}`)
}

/** The frames of `entry`'s events from its `from`th on (a remove is one event), with the ids `idOf` gives. */
function framesFrom(entry: FeedEntry, from: number, idOf: (index: number, last: boolean) => string): { frames: string; events: number } {
  if (entry.type === EVENT_REMOVE) {
    const removed = from === 0 ? entry.pairs.map(([at]) => at) : []
    return removed.length === 0 ? { frames: '', events: 0 } : { frames: frame(idOf(0, true), 'remove', JSON.stringify({ at: removed })), events: 1 }
  }
  let frames = ''
  for (let index = from; index < entry.pairs.length; index++) {
    const [at, name] = entry.pairs[index]!
    frames += frame(idOf(index, index === entry.pairs.length - 1), 'append', JSON.stringify({ name, at }))
  }
  return { frames, events: Math.max(0, entry.pairs.length - from) }
}

function frame(id: string, event: string, data: string): string {
  return `id: ${id}\nevent: ${event}\ndata: ${data}\n\n`
}

/**
 * An event id: `<list id>.<entry id>` once a stream entry's events are all sent, `<list id>.<entry
 * id>.<n>` after its nth (from 0) when more follow; `<list id>.s<n>` inside a snapshot, which
 * resumes nothing (a stream resumed from there starts again).
 */
export function parseEventId(id: string | undefined): ResumePoint | undefined {
  const match = id === undefined ? null : /^([\w-]{1,64})\.(\d{1,20}-\d{1,20})(?:\.(\d{1,6}))?$/.exec(id)
  if (!match) return undefined
  return { listId: match[1]!, entry: match[2]!, through: match[3] === undefined ? undefined : Number(match[3]) }
}

export interface EventStreamOptions {
  reads: FeedReads
  /** Bytes queued for the watcher past which its stream is ended (ITEMS_EVENTS_BUFFER_BYTES). */
  bufferBytes: number
  reports: StreamReports
  /** Cuts the connection: a client that takes nothing would never take the end of its stream either. */
  cut: () => void
}

/**
 * The stream of one watcher, written to `sink` (ended when the stream ends). `listener` is to be
 * registered with the replica's reader before `run()`: entries read meanwhile wait in the queue and
 * are sent after the catch-up, those already sent by it skipped (they are never newer than what a
 * catch-up read to the stream's end found).
 */
export function createEventStream(sink: PassThrough, lastEventId: string | undefined, { reads, bufferBytes, reports, cut }: EventStreamOptions) {
  let queue: FeedEntry[] = []
  let queuedBytes = 0
  let lost = false
  let ended = false
  let wake: (() => void) | undefined
  let snapshotCount = 0
  let listId = NO_LIST
  /** The last entry whose events are all sent. */
  let last = '0-0'
  const closed = new AbortController()
  sink.once('close', () => end())

  function end(): void {
    if (ended) return
    ended = true
    closed.abort()
    wake?.()
    if (!sink.writableEnded) sink.end()
  }

  const listener: FeedListener = {
    entry(entry) {
      if (ended) return
      queue.push(entry)
      queuedBytes += ENTRY_OVERHEAD_BYTES
      for (const [at, name] of entry.pairs) queuedBytes += at.length + name.length
      if (queuedBytes + sink.writableLength > bufferBytes) {
        reports.slow()
        end()
        sink.destroy()
        cut()
        return
      }
      wake?.()
    },
    lost() {
      lost = true
      wake?.()
    },
  }

  /** Writes a frame, waiting while the client has not taken what was written. */
  async function write(frame: string): Promise<void> {
    // A frame the client has not taken waits here: what piles up meanwhile is the queue, bounded.
    // An ended stream writes nothing: its wait is refused at once (its signal is aborted).
    if (ended || !sink.write(frame)) {
      await once(sink, 'drain', { signal: closed.signal }).catch(() => {
        throw new StreamEnded()
      })
    }
  }

  async function send(id: string, event: 'reset' | 'append' | 'remove' | 'synced', data: string): Promise<void> {
    await write(frame(id, event, data))
    reports.sent(event, 1)
  }

  const snapshotId = () => `${listId}.s${snapshotCount++}`

  /** An entry's events from its `skip`th on. `snapshot`: sent inside a snapshot, with ids that resume nothing. */
  async function sendEntry(entry: FeedEntry, skip: number, snapshot: boolean): Promise<void> {
    const { frames, events } = snapshot ? framesFrom(entry, 0, snapshotId) : skip === 0 ? framesOf(entry, listId) : framesFrom(entry, skip, liveIds(entry, listId))
    if (events === 0) return
    await write(frames)
    reports.sent(entry.type === EVENT_REMOVE ? 'remove' : 'append', events)
  }

  /**
   * Sends the stream's entries from `from` (included, and skipped: it was sent, all or its first
   * `skip` events) to the stream's end; with `until`, only up to it, each entry's pairs first
   * passed through `filter`, as part of a snapshot. Answers why the stream must start again, if it must.
   */
  async function catchUp(from: string, skip: number | undefined, until?: { id: string; filter: (entry: FeedEntry) => FeedEntry }): Promise<SnapshotReason | undefined> {
    let start = from === '0-0' ? '-' : from
    let first = true
    for (;;) {
      const entries = await reads.range(start, RANGE_COUNT)
      if (ended) throw new StreamEnded()
      let index = 0
      if (first && from !== '0-0') {
        // The point itself must still be there: otherwise entries after it may be gone too.
        if (entries[0]?.id !== from) return 'too_old'
        index = 1
        if (skip !== undefined) await sendEntry(entries[0], skip + 1, false)
        last = from
      }
      first = false
      for (; index < entries.length; index++) {
        const entry = entries[index]!
        if (until && compareIds(entry.id, until.id) > 0) return undefined
        if (entry.type === EVENT_RESET || entry.type === EVENT_MOVED) return 'reset'
        await sendEntry(until ? until.filter(entry) : entry, 0, until !== undefined)
        last = entry.id
      }
      if (entries.length < RANGE_COUNT) return undefined
      start = `(${entries.at(-1)!.id}`
    }
  }

  /** `reset`, the list a step at a time, the changes made while it was read, `synced`. */
  async function snapshot(reason: SnapshotReason): Promise<SnapshotReason | undefined> {
    reports.snapshot(reason)
    snapshotCount = 0
    /** Each step's first position and the stream's last id when it was read. */
    const steps: { start: string; last: string }[] = []
    let chunk = 1
    let offset = 0
    for (;;) {
      const step = await reads.snapshotStep(chunk, offset)
      if (ended) throw new StreamEnded()
      if (steps.length === 0) {
        listId = step.listId ?? NO_LIST
        await send(snapshotId(), 'reset', '{}')
      } else if ((step.listId ?? NO_LIST) !== listId) {
        return 'reset'
      }
      steps.push({ start: position(chunk, offset), last: step.last })
      for (const segment of step.segments) {
        for (const [index, entry] of segment.entries.entries()) {
          if (!isTombstone(entry)) await send(snapshotId(), 'append', JSON.stringify({ name: entry, at: position(segment.chunk, segment.offset + index) }))
        }
      }
      if (step.next === undefined) break
      chunk = step.next
      offset = 0
    }
    // A change made between two steps is in the steps read after it, not in those read before:
    // each of its positions is sent when the step that holds the position was read before it.
    // Every position is at or past the first step's start (chunk 1, offset 0).
    const changedAfter = (at: string, id: string) => compareIds(id, steps.findLast((step) => step.start <= at)!.last) > 0
    const through = steps.at(-1)!.last
    const restart = await catchUp(steps[0]!.last, undefined, {
      id: through,
      filter: (entry) => ({ ...entry, pairs: entry.pairs.filter(([at]) => changedAfter(at, entry.id)) }),
    })
    if (restart) return restart
    last = through
    await send(`${listId}.${through}`, 'synced', '{}')
    return catchUp(through, undefined)
  }

  /** Where a stream with `point` starts: a resume, or why it cannot. */
  async function resume(point: ResumePoint | undefined): Promise<SnapshotReason | undefined> {
    if (!point) return 'no_id'
    const state = await reads.state()
    if ((state.listId ?? NO_LIST) !== point.listId) return 'reset'
    if (compareIds(point.entry, state.last) > 0) return 'failover'
    // Entries after the point trimmed away (its own is checked again as it is read).
    const trimmed = point.entry === '0-0' ? state.maxDeleted !== '0-0' : compareIds(state.maxDeleted, point.entry) >= 0
    if (trimmed) return 'too_old'
    reports.resumed()
    listId = point.listId
    last = point.entry
    return catchUp(point.entry, point.through)
  }

  async function run(): Promise<void> {
    try {
      let restart = await resume(parseEventId(lastEventId))
      for (;;) {
        while (restart) {
          lost = false
          restart = await snapshot(restart)
        }
        if (ended) return
        if (lost) {
          restart = 'failover'
          continue
        }
        const entries = queue
        queue = []
        queuedBytes = 0
        if (entries.length === 0) {
          await new Promise<void>((resolve) => (wake = resolve))
          wake = undefined
          continue
        }
        for (const entry of entries) {
          if (compareIds(entry.id, last) <= 0) continue
          if (entry.type === EVENT_RESET || entry.type === EVENT_MOVED) {
            restart = 'reset'
            break
          }
          await sendEntry(entry, 0, false)
          last = entry.id
        }
      }
    } catch (error) {
      if (!(error instanceof StreamEnded)) throw error
    } finally {
      end()
    }
  }

  return { listener, run, end, comment: () => !ended && sink.writableLength === 0 && sink.write(': keep-alive\n\n') }
}

class StreamEnded extends Error {}
