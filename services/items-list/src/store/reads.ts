import { ForeignPositionError } from './errors.ts'
import { createHeldList } from './held-list.ts'
import {
  chunkAfter,
  chunksFrom,
  decodeIndex,
  FIRST_CHUNK,
  HEADER_VERSION,
  idMember,
  indexStart,
  isTombstone,
  liveNames,
  type HeaderFields,
  type IndexMembers,
  type Page,
  type ReadPosition,
  versionOf,
} from './layout.ts'
import { MIGRATE_STEP_CHUNKS, onLayout, type ListClient } from './list-client.ts'

/**
 * The list's reads: step by step from a place or the start, a page at a time, and the short list
 * held between reads (`held-list.ts`). Every step is one round trip of bounded commands.
 */

/** The list's two reads (documented on `ItemStore`). */
export interface Reads {
  steps(from?: ReadPosition, stop?: AbortSignal): AsyncGenerator<Page, void, undefined>
  page(from: ReadPosition | undefined, limit: number): Promise<Page>
  /** The list's version (`Page.version`), one O(1) round trip; none before the list exists or while one is moved in. */
  version(): Promise<string | undefined>
}

/** What one round trip of a read found: chunks' entries as stored, tombstones included. */
interface ChunksRead {
  listId: string | undefined
  /** The header's HEADER_VERSION fields, read before the chunks: the list is at least this one. */
  header: HeaderFields
  segments: Segment[]
  /** Where the next round trip starts; none when the list ended. */
  next: ReadPosition | undefined
}

/** One chunk's entries from `offset` on, as `LRANGE` gave them. */
interface Segment {
  chunk: number
  offset: number
  entries: string[]
}

/**
 * A read step's reply stays under about this many bytes: the chunks it reads are chosen from the
 * size of the last ones, between one and MAX_STEP_CHUNKS.
 */
const STEP_BYTES = 256 * 1024
const MAX_STEP_CHUNKS = 8

export function createReads(list: ListClient): Reads {
  const readChunks = createChunkReader(list)
  const readStart = createHeldList(list, () =>
    readChunks().then((read) => ({ page: { ...pageOf(read), version: versionOf(read.header, read.listId) }, header: read.header, listId: read.listId, whole: read.next === undefined })),
  )
  const read = (from?: ReadPosition) => (from ? readChunks(from).then(pageOf) : readStart())
  return {
    steps: (from, stop) => steps(read, from, stop),
    page: (from, limit) => page(readChunks, from, limit),
    version: () =>
      onLayout(list, 'version', (client) => Promise.all([client.hmGet(list.keys.header, HEADER_VERSION), client.zRange(list.keys.index, '-inf', '-inf', { BY: 'SCORE', LIMIT: { offset: 0, count: 1 } })])).then(
        ([header, members]) => versionOf(header, decodeIndex(members).listId),
      ),
  }
}

type ChunkReader = (from?: ReadPosition) => Promise<ChunksRead>

function pageOf({ segments, next }: ChunksRead): Page {
  return { names: segments.length === 1 ? liveNames(segments[0]!.entries) : segments.flatMap((segment) => liveNames(segment.entries)), next }
}

/**
 * The list from `from`, one step after another. Each step is read as the previous one is handed
 * out (never more than one ahead); `stop` aborted or the generator returned, no step is read any more.
 */
async function* steps(read: (from?: ReadPosition) => Promise<Page>, from: ReadPosition | undefined, stop?: AbortSignal): AsyncGenerator<Page, void, undefined> {
  let pending = read(from)
  try {
    for (;;) {
      const step = await pending
      // A generator told to return while it awaits goes on to its next yield: the signal says
      // at once that nobody wants what it would read.
      if (stop?.aborted) return
      // One step ahead: Redis reads the next chunks while these are handed out and written.
      if (step.next) pending = read(step.next)
      yield step
      if (!step.next) return
    }
  } finally {
    // Stopped early (the client went away): the step read ahead is nobody's, its failure too.
    void Promise.allSettled([pending])
  }
}

/** The first `limit` names from `from`, read step by step; `next` is where the name after them is. */
async function page(readChunks: ChunkReader, from: ReadPosition | undefined, limit: number): Promise<Page> {
  const found: string[] = []
  let position = from
  do {
    const read = await readChunks(position)
    for (const { chunk, offset, entries } of read.segments) {
      for (const [index, entry] of entries.entries()) {
        if (isTombstone(entry)) continue
        // One name past the limit: the next page starts with it.
        if (found.length === limit) return { names: found, next: { listId: read.listId!, chunk, offset: offset + index } }
        found.push(entry)
      }
    }
    position = read.next
  } while (position)
  return { names: found, next: undefined }
}

/**
 * Reads the list's chunks from `from` (or its start), a round trip at a time: the index and the
 * chunks it is guessed to name, sent together. A legacy list the read reaches is moved in first.
 */
function createChunkReader(list: ListClient): ChunkReader {
  const plan = createStepPlan()
  return async function readChunks(from) {
    for (;;) {
      const count = plan.chunksPerStep()
      const guesses = plan.guess(from?.chunk, count)
      const [header, members, ours, ...contents] = await sendReadStep(list, from, guesses, count)
      const headerId = header[0]
      if (ours === null) {
        // The header still names the cursor's list, the index does not: the index was lost, not the list.
        if (headerId === from?.listId) await list.check('read')
        throw new ForeignPositionError('the position is in another list')
      }
      const index = decodeIndex(members)
      const listId = index.listId ?? from?.listId
      // The commands are not one atomic step: a list made or reset between two of them looks
      // the same as keys that disagree, which only a script can tell apart. No list at all is
      // checked too (rare: before the first append), for chunks left without their index and header.
      if (!from && (listId === undefined || (headerId ?? undefined) !== listId)) await list.check('read')
      if (!from) plan.foundFirst(index.chunks)
      // Without an id there is no list at all yet: nothing to read.
      if (listId === undefined) return { listId, header, segments: [], next: undefined }

      const segments = guessedRight(index.chunks, guesses, contents, from?.offset ?? 0)
      plan.found(segments)
      const next = chunkAfterStep(index, segments)
      if (next !== LEGACY_FIRST) return { listId, header, segments, next: next === undefined ? undefined : { listId, chunk: next, offset: 0 } }
      await list.migrateStep(MIGRATE_STEP_CHUNKS)
      from = { listId, chunk: from?.chunk ?? 0, offset: 0 }
    }
  }
}

/**
 * A read step's one round trip: the header's version (its id first), `count` + 2 of the index's members from
 * `from`'s chunk (or the start), whether the index still names `from`'s list, and the guessed
 * chunks, the first from `from`'s offset.
 */
function sendReadStep(list: ListClient, from: ReadPosition | undefined, guesses: number[], count: number) {
  const { keys } = list
  // One Promise.all for every command: when the connection drops, each one's failure is handled.
  return onLayout(list, 'read', (client) =>
    Promise.all([
      client.hmGet(keys.header, HEADER_VERSION),
      client.zRange(keys.index, indexStart(from?.chunk), '+inf', { BY: 'SCORE', LIMIT: { offset: 0, count: count + 2 } }),
      from && client.zScore(keys.index, idMember(from.listId)),
      ...guesses.map((chunk, position) => client.lRange(keys.chunk(chunk), position === 0 && from ? from.offset : 0, -1)),
    ]),
  )
}

/** The guessed chunks that are the index's, up to the first wrong guess (a wrong guess costs a step). */
function guessedRight(chunks: number[], guesses: number[], contents: string[][], firstOffset: number): Segment[] {
  const segments: Segment[] = []
  for (const [place, chunk] of chunks.entries()) {
    if (guesses[place] !== chunk) break
    segments.push({ chunk, offset: place === 0 ? firstOffset : 0, entries: contents[place]! })
  }
  return segments
}

/** No chunk read, and the legacy list is all that is left: it is to be moved in before it is read. */
const LEGACY_FIRST = Symbol('legacy first')

/**
 * The chunk the next step starts at: the first the index named that was not read (it was asked
 * for more than were guessed); past the last chunk while a legacy list is moved into new chunks
 * there; none at the list's end.
 */
function chunkAfterStep(index: IndexMembers, segments: Segment[]): number | undefined | typeof LEGACY_FIRST {
  const following = index.chunks[segments.length]
  if (following !== undefined) return following
  const last = segments.at(-1)?.chunk
  if (last !== undefined) return index.legacy ? chunkAfter(last) : undefined
  return index.legacy ? LEGACY_FIRST : undefined
}

/**
 * Which chunks a read step asks for, and how many: as many as STEP_BYTES holds, judged by the size
 * of the last ones read. A fresh read guesses the first chunks the last fresh read found (a list's
 * first is FIRST_CHUNK), so that reading a short list takes one round trip and one LRANGE per chunk it has.
 */
function createStepPlan() {
  let firstChunks = [FIRST_CHUNK]
  let chunkBytes = 0
  return {
    chunksPerStep: () => (chunkBytes === 0 ? MAX_STEP_CHUNKS : Math.min(MAX_STEP_CHUNKS, Math.max(1, Math.floor(STEP_BYTES / chunkBytes)))),
    /** The chunks a step from `start` (none: the list's start) guesses the index names. */
    guess: (start: number | undefined, count: number) => (start === undefined ? firstChunks.slice(0, count) : chunksFrom(start, count)),
    foundFirst(chunks: number[]) {
      firstChunks = chunks.length > 0 ? chunks : [FIRST_CHUNK]
    },
    found(segments: Segment[]) {
      if (segments.length === 0) return
      let bytes = 0
      for (const { entries } of segments) for (const entry of entries) bytes += entry.length
      chunkBytes = bytes / segments.length
    },
  }
}
