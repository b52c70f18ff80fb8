import { createHash } from 'node:crypto'
import { EVENTS_SUFFIX } from './events-emit.ts'

/**
 * The list's shape in Redis: its keys, and how what Redis holds is read back (docs/list.md, "How
 * the list is kept"). The scripts that write it are in `scripts.ts`. Under `ITEMS_KEY`:
 *
 * - `<key>`, the index: a sorted set of the chunks' numbers (score = number), in list order; also
 *   `id:<list id>` at -inf (so that a cursor can name its list, and the set is never empty) and,
 *   while an earlier version's list is being moved in, `legacy` at +inf.
 * - the chunks, each a Redis list of up to CHUNK_NAMES names at `<key>`, CHUNK_INFIX and its number. A deleted name becomes a tombstone
 *   (the empty string, never a name) and the names after it keep their positions, so a reader
 *   holding (chunk, offset) never skips nor repeats one; a chunk with nothing but tombstones goes.
 * - `<key>:header`: a hash of `count` (names in the list), `tail` (the last chunk's number),
 *   `fill` (how many names that chunk has had; CHUNK_NAMES when the next append opens a new one)
 *   and, while an earlier version's list is being moved in, `legacy`.
 * - `<key>:legacy`: the list an earlier version kept at `<key>` (`RPUSH`), moved into chunks
 *   from its head a batch at a time. Until it is empty, appends go to its tail, after it.
 * - `<key>:events`: the change feed, a Redis Stream that every write script adds to (docs/events.md).
 */
export const CHUNK_NAMES = 1_000

/** A deleted name's place in its chunk. */
export const TOMBSTONE = ''

/** What follows the list's key in a chunk's key; the one place the chunk-key format is written. */
export const CHUNK_INFIX = ':chunk:'

export interface ListKeys {
  index: string
  header: string
  legacy: string
  chunk(number: number): string
  /** A `SCAN … MATCH` pattern that finds every chunk key of the list, whatever its number. */
  chunkPattern: string
  /** The number of a chunk key found by `chunkPattern`; undefined for a key that is not a chunk's. */
  chunkNumber(key: string): number | undefined
  /** The lock a delete holds while it takes more than one step. */
  deleting(nameHash: string): string
  /** The record of an append made under an idempotency key. */
  idempotency(key: string): string
  /** The list's change feed: a Redis Stream (`events-emit.ts`). */
  events: string
}

export function listKeys(key: string): ListKeys {
  const chunkPrefix = `${key}${CHUNK_INFIX}`
  return {
    index: key,
    header: `${key}:header`,
    legacy: `${key}:legacy`,
    chunk: (number) => `${chunkPrefix}${number}`,
    // A key may hold the glob's own characters: they are matched as themselves.
    chunkPattern: `${chunkPrefix.replace(/[*?[\]\\]/g, '\\$&')}*`,
    chunkNumber: (found) => {
      const suffix = found.slice(chunkPrefix.length)
      return found.startsWith(chunkPrefix) && /^[1-9]\d{0,14}$/.test(suffix) ? Number(suffix) : undefined
    },
    deleting: (nameHash) => `${key}:deleting:${nameHash}`,
    idempotency: (idempotencyKey) => `${key}:idempotency:${idempotencyKey}`,
    events: `${key}${EVENTS_SUFFIX}`,
  }
}

/**
 * What identifies a name in the keys and records: a delete's lock is named after it, and an
 * idempotency record holds it (the only field an append reads: other fields are ignored, so a
 * body that differs only by them is the same request). Hashed so that both stay small whatever
 * the name.
 */
export function nameFingerprint(name: string): string {
  return createHash('sha256').update(name).digest('base64url')
}

/** The keys every script is given first (KEYS[1] to KEYS[3]). */
export type LayoutKeys = [index: string, header: string, legacy: string]

export function layoutKeys(keys: ListKeys): LayoutKeys {
  return [keys.index, keys.header, keys.legacy]
}

/** The index's members that are not chunks. */
export const ID_PREFIX = 'id:'
export const LEGACY_MEMBER = 'legacy'

/** The header's field that counts the names. */
export const HEADER_COUNT = 'count'
/**
 * The header's fields that no write of names leaves as they were nor ever brings back, while no
 * earlier version's list is moving in (`legacy` set; docs/list.md, "The held list"): an append
 * moves `tail` and `fill` on, and neither goes back; a delete lowers `count`; a reset gives a new
 * `id`. Read together, they are the list's version.
 */
export const HEADER_VERSION = ['id', HEADER_COUNT, 'tail', 'fill', LEGACY_MEMBER]

/** The header as `HMGET … HEADER_VERSION` gives it, a field not there as null. */
export type HeaderFields = (string | null)[]

export interface Header {
  /** The list's id, as the header keeps it. */
  listId: string | undefined
  /** An earlier version's list is still being moved in. */
  legacy: boolean
  /** The fields as one string to compare (none has a space: an id, numbers, a flag). */
  version: string
}

const HEADER_ID_AT = HEADER_VERSION.indexOf('id')
const HEADER_LEGACY_AT = HEADER_VERSION.indexOf(LEGACY_MEMBER)

export function decodeHeader(fields: HeaderFields): Header {
  return { listId: fields[HEADER_ID_AT] ?? undefined, legacy: (fields[HEADER_LEGACY_AT] ?? null) !== null, version: fields.join(' ') }
}

/** Where a read goes on from: a chunk's number and a place in it (docs/list.md, "How the list is kept"). */
export interface ReadPosition {
  /** The list this place is in: a place in another list means nothing here. */
  listId: string
  chunk: number
  offset: number
}

/**
 * Names in list order, and where the list goes on after them (none when it ends there): what each
 * step of a read yields, and what a page is.
 */
export interface Page {
  names: string[]
  next: ReadPosition | undefined
  /**
   * On a read from the list's start: the header's version, read before the names, when it names
   * this list and nothing is moving in (the list's validator, `ETag`); none otherwise.
   */
  version?: string | undefined
}

/** The header's version as a validator: when the list is whole in its chunks and the header names the index's list. */
export function versionOf(fields: HeaderFields, listId: string | undefined): string | undefined {
  const header = decodeHeader(fields)
  return listId !== undefined && header.listId === listId && !header.legacy ? header.version : undefined
}

/** A new list's first chunk: a fresh read guesses it before it knows better. */
export const FIRST_CHUNK = 1

/** The index's member that names the list `listId`. */
export function idMember(listId: string): string {
  return `${ID_PREFIX}${listId}`
}

/**
 * Where a read of the index starts, by score: from a chunk's number, or from the start (-inf),
 * which takes in the `id:` member and so the list's id.
 */
export function indexStart(chunk: number | undefined): number | '-inf' {
  return chunk ?? '-inf'
}

/** What a run of the index's members says, in the order `ZRANGE … BYSCORE` gave them. */
export interface IndexMembers {
  /** The list's id, when the run began at -inf. */
  listId: string | undefined
  /** The chunks' numbers, in list order. */
  chunks: number[]
  /** An earlier version's list is still being moved in, after the last chunk. */
  legacy: boolean
}

export function decodeIndex(members: readonly string[]): IndexMembers {
  const decoded: IndexMembers = { listId: undefined, chunks: [], legacy: false }
  for (const member of members) {
    if (member.startsWith(ID_PREFIX)) decoded.listId = member.slice(ID_PREFIX.length)
    else if (member === LEGACY_MEMBER) decoded.legacy = true
    else decoded.chunks.push(Number(member))
  }
  return decoded
}

/**
 * The `count` chunk numbers from `first` on: numbers run on, but for chunks deleted whole, so
 * these are the chunks a read guesses it will find (the index says which exist).
 */
export function chunksFrom(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, index) => first + index)
}

/**
 * The chunk an earlier version's list is moved into next, after `last` (0: none yet): the
 * legacy list lies past the last chunk.
 */
export function chunkAfter(last: number): number {
  return last + 1
}

/** A chunk's entry that stands for a deleted name. */
export function isTombstone(entry: string): boolean {
  return entry === TOMBSTONE
}

/** A chunk's live names: its entries without the tombstones of deleted ones. */
export function liveNames(entries: string[]): string[] {
  return entries.includes(TOMBSTONE) ? entries.filter((entry) => entry !== TOMBSTONE) : entries
}
