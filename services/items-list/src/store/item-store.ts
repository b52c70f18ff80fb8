import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { RedisUnavailableError, type RedisCommands, type RedisConnection } from '@repo/service-kit'
import { createAcknowledgedAppends, type OneConnection } from './acknowledged-appends.ts'
import {
  appendArguments,
  chunkAfter,
  chunksFrom,
  decodeIndex,
  FIRST_CHUNK,
  HEADER_COUNT,
  HEADER_ID,
  idMember,
  INCONSISTENT,
  indexStart,
  listKeys,
  liveNames,
  NO_LAYOUT,
  isTombstone,
  type AppendOutcome,
  type ItemStoreScripts,
  type OnceOutcome,
} from './layout.ts'
import type { StoreCommand } from './metrics.ts'

export type { AppendOutcome, OnceOutcome } from './layout.ts'

/** Where a read goes on from: a chunk's number and a place in it (docs/design.md, "The list in chunks"). */
export interface ReadPosition {
  /** The list this place is in: a place in another list means nothing here. */
  listId: string
  chunk: number
  offset: number
}

/** What one bounded step of a read found: chunks' entries as stored, tombstones included. */
interface ReadStep {
  listId: string | undefined
  segments: Segment[]
  /** Where the next step starts; none when the list ended. */
  next: ReadPosition | undefined
}

/** One chunk's entries from `offset` on, as `LRANGE` gave them. */
interface Segment {
  chunk: number
  offset: number
  entries: string[]
}

/** The names one read step found, and where the next step starts; none when the list ended. */
export interface Step {
  names: string[]
  next: ReadPosition | undefined
}

/** At most `limit` names, and where the names after them start. */
export interface Page {
  names: string[]
  /** Where the next page starts; none when no name follows. */
  next: ReadPosition | undefined
}

/**
 * The ordered list of item names. Every method rejects with service-kit's `RedisUnavailableError`
 * when Redis cannot be reached, refuses a command or misses a command's deadline (each step of a
 * long read or delete has a deadline of its own), and an append also when fewer replicas than
 * asked confirm it in time.
 */
export interface ItemStore {
  /** Appends `name` at the end of the list, unless it holds `ITEMS_MAX_COUNT` names already (`full`). */
  append(name: string): Promise<AppendOutcome>
  /**
   * Appends `name` unless `key` was already used: `replayed` when it was, for the same name
   * (nothing appended), `conflict` when for another name. The record is read before the cap, so
   * that a retry of an append stored before the list filled up is still `replayed`.
   */
  appendOnce(name: string, key: string): Promise<OnceOutcome>
  /**
   * One bounded step of reading the list, from its start or from `from`: the live names of a few
   * chunks (one round trip), and where the next step starts (none at the end; a step may hold no
   * name and still have a next). Rejects with `ForeignPositionError` when `from` is a place in
   * another list.
   */
  read(from?: ReadPosition): Promise<Step>
  /**
   * The list from `from` on, as the names of one step after another (never an empty batch). Each
   * step is read as the previous one is handed out (never more than one ahead); `stop` aborted or
   * the generator returned, no step is read any more. Read step by step, whole or by pages, every
   * name that is in the list for the whole read comes exactly once, in insertion order; names
   * appended or deleted during it may come or not.
   */
  names(from: ReadPosition, stop?: AbortSignal): AsyncGenerator<string[], void, undefined>
  /** The first `limit` names from `from` (or the start), with the same guarantees as `names`. */
  page(from: ReadPosition | undefined, limit: number): Promise<Page>
  /**
   * Removes every occurrence of `name`, in steps of a few milliseconds each; resolves to how many
   * it removed. Of concurrent deletes of one name, one removes it and the others then find none.
   */
  removeAll(name: string): Promise<number>
  /**
   * How many names the list holds, and how many of them an earlier version's list still has to
   * move into the chunks.
   */
  counts(): Promise<{ names: number; unmigrated: number }>
  /**
   * Moves an earlier version's list into the chunks, a step at a time, until none is left, and
   * resolves to how many names this call moved; makes the layout exist when there is none.
   */
  migrate(): Promise<number>
  /**
   * Resolves when Redis answers and the list's keys agree; rejects with `InconsistentListError`
   * when they do not (the reason is the error's message).
   */
  check(): Promise<void>
  /**
   * Empties the list, whatever state its keys are in, and resolves to how many chunk numbers it
   * cleared: a new, empty list (with a new id) takes the old one's place at once, then the old
   * chunks are deleted a batch at a time. Appends made once it resolved are kept and read.
   */
  reset(): Promise<number>
}

/** A read position that belongs to another list than this one (a cursor from elsewhere). */
export class ForeignPositionError extends Error {
  override readonly name = 'ForeignPositionError'
}

/**
 * The list's keys disagree (its index deleted by hand, two lists to move in): the store refuses to
 * append, read or delete rather than answer for a place no read shows. The message says how.
 */
export class InconsistentListError extends Error {
  override readonly name = 'InconsistentListError'
}

/**
 * A delete that took more than one step found, on a later step, that its lock had expired or was
 * another delete's: whether the occurrences it removed were all there were, and whether another
 * delete answered for them, cannot be told. It did nothing more; a retry answers for the name.
 */
export class DeleteInterruptedError extends Error {
  override readonly name = 'DeleteInterruptedError'
}

export interface ItemStoreSettings {
  /** `ITEMS_KEY`: where the list lives (its index; the chunks and the rest under `<key>:`). */
  key: string
  /** `ITEMS_MAX_COUNT`: the most names the list may hold. */
  maxCount: number
  /** `IDEMPOTENCY_TTL_SECONDS`: how long an idempotency key is remembered after its append. */
  idempotencyTtlSeconds: number
  /** `ITEMS_MIN_REPLICAS_ACK`: replicas that must hold an append before it resolves; 0, none. */
  minReplicasAck?: number
  /**
   * The connection appends are sent on when `minReplicasAck` is above 0 (the store's own
   * otherwise): `WAIT` blocks the connection it runs on, so waiting replicas would hold up
   * every read queued behind it, and a primary without replicas would get the whole store set
   * aside, `/ready` included, for want of a copy.
   */
  appends?: RedisConnection<ItemStoreScripts>
  /** Told of every command refused because the list's keys disagree, with how they disagree. */
  onInconsistent?: (command: StoreCommand, reason: string) => void
}

/**
 * A read step's reply stays under about this many bytes: the chunks it reads are chosen from the
 * size of the last ones, between one and MAX_STEP_CHUNKS.
 */
const STEP_BYTES = 256 * 1024
const MAX_STEP_CHUNKS = 8
/** A delete step's budget, by Redis's clock: well under the ~10 ms no command may exceed. */
const REMOVE_STEP_MICROS = 3_000
/** A delete lock outlives a step by far, and a replica that dies holding one by little. */
const REMOVE_LOCK_MS = 5_000
/**
 * How long a delete waits for another delete of the same name before it gives up (503), from the
 * first `busy` of the wait: a delete of a million names takes about 100 ms, so this is a queue of
 * dozens, or a holder gone astray.
 */
const REMOVE_WAIT_MS = 5_000
/** Old chunks a reset deletes per command. */
const RESET_BATCH_CHUNKS = 100
/** Chunks a migration step moves: about 2 ms of Redis's time for names of 16 bytes. */
const MIGRATE_STEP_CHUNKS = 8

/**
 * What identifies a request under one key: its name, the only field an append reads (other
 * fields are ignored, so a body that differs only by them is the same request). Hashed so that a
 * record stays small whatever the name.
 */
function fingerprintOf(name: string): string {
  return createHash('sha256').update(name).digest('base64url')
}

/**
 * The `ItemStore` on the chunked layout (`layout.ts`), over `connection` (which owns the deadline,
 * the reconnection and the outage logs). Each step is sent through `connection.run` under its
 * `StoreCommand` name, which is how `items_store_commands_total` counts it.
 */
export function createItemStore(connection: RedisConnection<ItemStoreScripts>, settings: ItemStoreSettings): ItemStore {
  const { maxCount, idempotencyTtlSeconds, minReplicasAck = 0, appends = connection, onInconsistent } = settings
  const keys = listKeys(settings.key)
  const list = appendArguments(keys, maxCount)
  const ttl = String(idempotencyTtlSeconds)
  const sendAcknowledged = minReplicasAck > 0 ? createAcknowledgedAppends(appends, minReplicasAck) : undefined
  // The id a list gets if this call is the one to make it: unique to the call, so that a list
  // deleted and made anew has an id of its own, and cursors into the old one are refused.
  const processId = randomBytes(9).toString('base64url')
  let made = 0
  const newListId = () => `${processId}${(made++).toString(36)}`
  // A fresh read's guess at the first chunks: those the last fresh read found (a list's first is
  // 1), so that reading a short list takes one round trip and one LRANGE per chunk it has.
  let firstChunks = [FIRST_CHUNK]
  let chunkBytes = 0

  /** A script's refusal (an error reply starting INCONSISTENT) as an `InconsistentListError`, reported. */
  function refusing<T>(command: StoreCommand, sent: Promise<T>): Promise<T> {
    return sent.catch((error: unknown) => {
      const reply = error instanceof RedisUnavailableError && error.cause instanceof Error ? error.cause.message : ''
      if (!reply.startsWith(`${INCONSISTENT} `)) throw error
      // Redis adds where the script failed: the reason is what comes before.
      throw inconsistent(command, reply.slice(INCONSISTENT.length + 1).replace(/ script: .*$/s, ''))
    })
  }

  function inconsistent(command: StoreCommand, reason: string): InconsistentListError {
    onInconsistent?.(command, reason)
    return new InconsistentListError(reason)
  }

  function run<T>(command: StoreCommand, send: (client: RedisCommands<ItemStoreScripts>) => Promise<T>): Promise<T> {
    return refusing(command, connection.run(command, send))
  }

  /** `write`, resolved at once, or once enough replicas hold it (`ITEMS_MIN_REPLICAS_ACK`). */
  function acknowledged<T>(command: StoreCommand, write: (client: OneConnection | RedisCommands<ItemStoreScripts>) => Promise<T>): Promise<T> {
    return sendAcknowledged ? refusing(command, sendAcknowledged(command, write)) : run(command, write)
  }

  /** Rejects with `InconsistentListError` when the list's keys disagree, as one script sees them. */
  async function check(command: StoreCommand): Promise<void> {
    const reason = await run(command, (client) => client.check(keys))
    if (reason !== undefined) throw inconsistent(command, reason)
  }

  /** Runs `command`; when an earlier version's list still sits at the key, moves it aside first. */
  function onLayout<T>(command: StoreCommand, send: (client: RedisCommands<ItemStoreScripts>) => Promise<T>): Promise<T> {
    return run(command, send).catch(async (error: unknown) => {
      if (!isWrongType(error)) throw error
      await run('migrate_step', (client) => client.migrateStep(keys, newListId(), 0))
      return run(command, send)
    })
  }

  /** How many chunks the next step reads: as many as STEP_BYTES holds, judged by the last ones. */
  function chunksPerStep(): number {
    return chunkBytes === 0 ? MAX_STEP_CHUNKS : Math.min(MAX_STEP_CHUNKS, Math.max(1, Math.floor(STEP_BYTES / chunkBytes)))
  }

  async function readChunks(from?: ReadPosition): Promise<ReadStep> {
    for (;;) {
      const count = chunksPerStep()
      // The chunks to read are guessed (numbers run on, but for chunks deleted whole) and sent in
      // the same round trip as the index that says which exist; a wrong guess costs a step.
      const start = from?.chunk
      const guesses = start === undefined ? firstChunks.slice(0, count) : chunksFrom(start, count)
      // One Promise.all for every command: when the connection drops, each one's failure is handled.
      const [headerId, members, ours, ...contents] = await onLayout('read', (client) =>
        Promise.all([
          client.hGet(keys.header, HEADER_ID),
          client.zRange(keys.index, indexStart(from?.chunk), '+inf', { BY: 'SCORE', LIMIT: { offset: 0, count: count + 2 } }),
          from && client.zScore(keys.index, idMember(from.listId)),
          ...guesses.map((chunk, position) => client.lRange(keys.chunk(chunk), position === 0 && from ? from.offset : 0, -1)),
        ]),
      )
      if (ours === null) {
        // The header still names the cursor's list, the index does not: the index was lost, not the list.
        if (headerId === from?.listId) await check('read')
        throw new ForeignPositionError('the position is in another list')
      }

      const index = decodeIndex(members)
      const { chunks, legacy } = index
      const listId = index.listId ?? from?.listId
      // The commands are not one atomic step: a list made or reset between two of them looks
      // the same as keys that disagree, which only a script can tell apart. No list at all is
      // checked too (rare: before the first append), for chunks left without their index and header.
      if (!from && (listId === undefined || (headerId ?? undefined) !== listId)) await check('read')
      if (!from) firstChunks = chunks.length > 0 ? chunks : [FIRST_CHUNK]
      // Without an id there is no list at all yet: nothing to read.
      if (listId === undefined) return { listId, segments: [], next: undefined }

      const segments: Segment[] = []
      let bytes = 0
      for (const [place, chunk] of chunks.entries()) {
        if (guesses[place] !== chunk) break
        const entries = contents[place]!
        segments.push({ chunk, offset: place === 0 && from ? from.offset : 0, entries })
        for (const entry of entries) bytes += entry.length
      }
      if (segments.length > 0) chunkBytes = bytes / segments.length

      // The index was asked for more chunks than were guessed: the first not read is the next step's.
      const following = chunks[segments.length]
      if (following !== undefined) return { listId, segments, next: { listId, chunk: following, offset: 0 } }
      // Every chunk there is, is read; the legacy list, while there is one, moves into new chunks past the last.
      const last = segments.at(-1)?.chunk
      if (last !== undefined) return { listId, segments, next: legacy ? { listId, chunk: chunkAfter(last), offset: 0 } : undefined }
      if (!legacy) return { listId, segments, next: undefined }
      await run('migrate_step', (client) => client.migrateStep(keys, newListId(), MIGRATE_STEP_CHUNKS))
      from = { listId, chunk: from?.chunk ?? 0, offset: 0 }
    }
  }

  async function read(from?: ReadPosition): Promise<Step> {
    const { segments, next } = await readChunks(from)
    const names = segments.length === 1 ? namesOf(segments[0]!) : segments.flatMap(namesOf)
    return { names, next }
  }

  async function* names(from: ReadPosition, stop?: AbortSignal): AsyncGenerator<string[], void, undefined> {
    let pending = read(from)
    try {
      for (;;) {
        const step = await pending
        // A generator told to return while it awaits goes on to its next yield: the signal says
        // at once that nobody wants what it would read.
        if (stop?.aborted) return
        // One step ahead: Redis reads the next chunks while these are handed out and written.
        if (step.next) pending = read(step.next)
        if (step.names.length > 0) yield step.names
        if (!step.next) return
      }
    } finally {
      // Stopped early (the client went away): the step read ahead is nobody's, its failure too.
      void Promise.allSettled([pending])
    }
  }

  async function page(from: ReadPosition | undefined, limit: number): Promise<Page> {
    const found: string[] = []
    let position = from
    do {
      const step = await readChunks(position)
      for (const { chunk, offset, entries } of step.segments) {
        for (const [index, entry] of entries.entries()) {
          if (isTombstone(entry)) continue
          // One name past the limit: the next page starts with it.
          if (found.length === limit) return { names: found, next: { listId: step.listId!, chunk, offset: offset + index } }
          found.push(entry)
        }
      }
      position = step.next
    } while (position)
    return { names: found, next: undefined }
  }

  async function removeAll(name: string): Promise<number> {
    const lock = keys.deleting(fingerprintOf(name))
    const token = randomUUID()
    let removed = 0
    let from = 0
    let continuing = false
    let waitingSince: number | undefined
    for (let waits = 0; ; ) {
      const step = await run('remove_step', (client) =>
        client.removeStep(keys, newListId(), lock, name, token, from, REMOVE_STEP_MICROS, REMOVE_LOCK_MS, continuing),
      )
      if (step.state === 'lost') throw new DeleteInterruptedError(`the delete lost its lock after removing ${removed} occurrences: its outcome is unknown`)
      if (step.state === 'busy') {
        waitingSince ??= performance.now()
        if (performance.now() - waitingSince > REMOVE_WAIT_MS) throw new RedisUnavailableError(`another delete of the name held it for ${REMOVE_WAIT_MS} ms`)
        // From 5 ms to 100 ms between tries.
        await sleep(Math.min(100, 5 * 2 ** waits++))
        continue
      }
      waitingSince = undefined
      removed += step.removed
      if (step.state === 'done') return removed
      from = step.from
      continuing = true
    }
  }

  async function reset(): Promise<number> {
    const tail = await run('reset', (client) => client.reset(keys, newListId()))
    for (let first = 1; first <= tail; first += RESET_BATCH_CHUNKS) {
      const batch = Array.from({ length: Math.min(RESET_BATCH_CHUNKS, tail - first + 1) }, (_, index) => keys.chunk(first + index))
      await run('reset', (client) => client.del(batch))
    }
    return tail
  }

  /**
   * `send` without a list id, the common case; sent again with a fresh one when the script found no
   * layout to append to (it wrote nothing then: a list's first append, or an earlier version's list
   * still at the key).
   */
  async function withLayout<T>(send: (listId: string) => Promise<T | typeof NO_LAYOUT>): Promise<T> {
    const outcome = await send('')
    if (outcome !== NO_LAYOUT) return outcome
    // Given an id, a script makes the layout (ensure()): it never answers 'nolayout'.
    return (await send(newListId())) as T
  }

  return {
    append(name) {
      return withLayout((listId) => acknowledged('append', (client) => client.append(list, listId, name)))
    },
    appendOnce(name, idempotencyKey) {
      const record = keys.idempotency(idempotencyKey)
      const fingerprint = fingerprintOf(name)
      return withLayout((listId) => acknowledged('append_once', (client) => client.appendOnce(list, listId, name, record, fingerprint, ttl)))
    },
    read,
    names,
    page,
    removeAll,
    async counts() {
      const [names, unmigrated] = await run('counts', (client) => Promise.all([client.hGet(keys.header, HEADER_COUNT), client.lLen(keys.legacy)]))
      return { names: Number(names ?? 0), unmigrated }
    },
    async migrate() {
      for (let moved = 0; ; ) {
        const step = await run('migrate_step', (client) => client.migrateStep(keys, newListId(), MIGRATE_STEP_CHUNKS))
        moved += step.moved
        if (step.left === 0) return moved
      }
    },
    check: () => check('check'),
    reset,
  }
}

/** A segment's live names. */
function namesOf(segment: Segment): string[] {
  return liveNames(segment.entries)
}

/** Redis answering that the key holds another type: an earlier version's list, not yet moved aside. */
function isWrongType(error: unknown): boolean {
  return error instanceof RedisUnavailableError && error.cause instanceof Error && error.cause.message.startsWith('WRONGTYPE')
}
