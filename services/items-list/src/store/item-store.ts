// `ItemStore`, what the routes call: the list's appends, reads, deletes, counts, move and reset,
// assembled from the store's parts over one Redis connection.
import type { RedisConnection } from '@repo/service-kit'
import { removeAll } from './deletes.ts'
import { HEADER_COUNT, nameFingerprint, type Page, type ReadPosition } from './layout.ts'
import { createListClient, MIGRATE_STEP_CHUNKS, type ListClient, type ListClientSettings } from './list-client.ts'
import type { ListCounts } from './metrics.ts'
import { createReads } from './reads.ts'
import { appendArguments, type AppendOutcome, type ItemStoreScripts, type OnceOutcome } from './scripts.ts'
import { createAppendGroups } from './append-groups.ts'

export type { AppendOutcome, OnceOutcome } from './scripts.ts'
export type { Page, ReadPosition } from './layout.ts'
export { DeleteInterruptedError, ForeignPositionError, InconsistentListError } from './errors.ts'

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
   * The list from `from` (or its start), one bounded step after another: each the live names of a
   * few chunks (one round trip; there may be none) and where the next step starts, which the last
   * step has not. Rejects with `ForeignPositionError` when `from` is a place in another list. Each
   * step is read as the previous one is handed out (never more than one ahead); `stop` aborted or
   * the generator returned, no step is read any more. Read step by step, whole or by pages, every
   * name that is in the list for the whole read comes exactly once, in insertion order; names
   * appended or deleted during it may come or not.
   */
  steps(from?: ReadPosition, stop?: AbortSignal): AsyncGenerator<Page, void, undefined>
  /** The first `limit` names from `from` (or the start), with the same guarantees as `steps`. */
  page(from: ReadPosition | undefined, limit: number): Promise<Page>
  /**
   * The list's version, the header's fields read with one O(1) round trip: it never comes back
   * once changed, so it is the whole list's validator. None before the list exists or while an
   * earlier version's list is moved in (a delete and an append there may bring it back).
   */
  version(): Promise<string | undefined>
  /**
   * Removes every occurrence of `name`, in steps of a few milliseconds each; resolves to how many
   * it removed. Of concurrent deletes of one name, one removes it and the others then find none.
   */
  removeAll(name: string): Promise<number>
  /**
   * How many names the list holds, and how many of them an earlier version's list still has to
   * move into the chunks.
   */
  counts(): Promise<ListCounts>
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
   * Empties the list, whatever state its keys are in, and resolves to how many old chunks it
   * deleted: a new, empty list (with a new id, its chunks numbered after every chunk key there)
   * takes the old one's place at once, then the old chunks are found and deleted a SCAN step at a
   * time, whether the index named them or not. Appends made once it resolved are kept and read.
   */
  reset(): Promise<number>
}

export interface ItemStoreSettings extends ListClientSettings {
  /** `ITEMS_MAX_COUNT`: the most names the list may hold. */
  maxCount: number
  /** `IDEMPOTENCY_TTL_SECONDS`: how long an idempotency key is remembered after its append. */
  idempotencyTtlSeconds: number
  /** Told the size of each group of appends sent (`items_store_append_group_size`). */
  onAppendGroup?: (size: number) => void
}

/**
 * The `ItemStore` on the chunked layout (`layout.ts`), over `connection` (which owns the deadline,
 * the reconnection and the outage logs), from its parts: the list's commands (`list-client.ts`),
 * the appends, the reads (`reads.ts`), the delete (`deletes.ts`), the counts, the move of an
 * earlier version's list and the reset.
 */
export function createItemStore(connection: RedisConnection<ItemStoreScripts>, settings: ItemStoreSettings): ItemStore {
  const list = createListClient(connection, settings)
  return {
    ...createAppends(list, settings),
    ...createReads(list),
    removeAll: (name) => removeAll(list, name),
    counts: () => countNames(list),
    migrate: () => migrateAll(list),
    check: () => list.check('check'),
    reset: () => resetList(list),
  }
}

/**
 * Appends, committed in groups (`append-groups.ts`), their arguments built once: each group is
 * one script run (`withLayout` sends it again only when the list has no layout yet), then, with
 * `ITEMS_MIN_REPLICAS_ACK`, one WAIT.
 */
function createAppends(list: ListClient, settings: ItemStoreSettings): Pick<ItemStore, 'append' | 'appendOnce'> {
  const args = appendArguments(list.keys, settings.maxCount, settings.idempotencyTtlSeconds, list.eventsKept)
  const appendInGroup = createAppendGroups(
    (command, appends, askedAt) =>
      list.withLayout(command, (listId) => list.acknowledged(command, (client) => client.appendGroup(args, listId, appends), askedAt)),
    settings.onAppendGroup,
  )
  return {
    append: (name) => appendInGroup({ name }) as Promise<AppendOutcome>,
    appendOnce: (name, idempotencyKey) => appendInGroup({ name, record: list.keys.idempotency(idempotencyKey), fingerprint: nameFingerprint(name) }),
  }
}

async function countNames(list: ListClient): Promise<ListCounts> {
  const { keys } = list
  const [nameCount, unmigratedNameCount] = await list.run('counts', (client) => Promise.all([client.hGet(keys.header, HEADER_COUNT), client.lLen(keys.legacy)]))
  return { nameCount: Number(nameCount ?? 0), unmigratedNameCount }
}

async function migrateAll(list: ListClient): Promise<number> {
  let moved = 0
  let left: number
  do {
    const step = await list.migrateStep(MIGRATE_STEP_CHUNKS)
    moved += step.moved
    left = step.left
  } while (left > 0)
  return moved
}

/** Old chunks a reset unlinks per command. */
const RESET_BATCH_CHUNKS = 100

/**
 * The reset in three moves: the chunk keys there now are scanned for the highest number; the
 * script puts the new list in place, numbering its chunks after that and after whatever the old
 * header and index name; then every chunk key numbered up to there is found again and deleted.
 * A chunk the old list opened between the first scan and the script is one its header or index
 * names, and a new list's chunks are numbered past the old ones: none is missed, none of the new
 * list's deleted.
 */
async function resetList(list: ListClient): Promise<number> {
  let highest = 0
  for await (const step of list.chunkKeys('reset')) for (const { number } of step) highest = Math.max(highest, number)
  const tail = await list.run('reset', (client) => client.reset(list.keys, list.newListId(), highest, list.eventsKept))
  let deleted = 0
  for await (const step of list.chunkKeys('reset')) {
    const old = step.filter(({ number }) => number <= tail).map(({ key }) => key)
    // UNLINK: a chunk's names are freed in the background, not while every client waits.
    for (let first = 0; first < old.length; first += RESET_BATCH_CHUNKS) deleted += await list.run('reset', (client) => client.unlink(old.slice(first, first + RESET_BATCH_CHUNKS)))
  }
  return deleted
}
