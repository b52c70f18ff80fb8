// One list's keys and how the store's parts send commands about it: metrics names, refusals made
// errors, the layout made only after a look for chunks no index numbers, the chunk keys scanned.
import { randomBytes } from 'node:crypto'
import { RedisUnavailableError, type RedisCommands, type RedisConnection } from '@repo/service-kit'
import { createAcknowledgedAppends, type OneConnection } from './acknowledged-appends.ts'
import { InconsistentListError } from './errors.ts'
import { listKeys, type ListKeys } from './layout.ts'
import { INCONSISTENT, NO_LAYOUT } from './lua.ts'
import { DEFAULT_EVENTS_KEPT } from './events-emit.ts'
import type { ItemStoreScripts, MigrationProgress } from './scripts.ts'
import type { StoreCommand } from './metrics.ts'

/** Chunks a migration step moves: about 2 ms of Redis's time for names of 16 bytes. */
export const MIGRATE_STEP_CHUNKS = 8

/** Keys a SCAN step of the list's chunk keys looks at: about 0.1 ms of Redis's time. */
const SCAN_STEP_KEYS = 1_000

/** What the store's parts send on the list's connection: commands on one client, answered together. */
type Send<T> = (client: RedisCommands<ItemStoreScripts>) => Promise<T>

/**
 * One list's keys, and how the store's parts send commands about it: each under its `StoreCommand`
 * name (which is how `items_store_commands_total` counts it), a script's refusal (an error reply
 * starting INCONSISTENT) turned into an `InconsistentListError` and reported.
 */
export interface ListClient {
  keys: ListKeys
  /** `ITEMS_EVENTS_KEPT`: about how many events the list's stream keeps (`MAXLEN ~`). */
  eventsKept: number
  /** The connection's epoch: it goes up when Redis may hold less than was read from it. */
  readonly epoch: number
  /** An id for a script to give the list if it is the one to make it (`ensure()`). */
  newListId(): string
  run<T>(command: StoreCommand, send: Send<T>): Promise<T>
  /**
   * `write`, resolved at once, or once enough replicas hold it (`ITEMS_MIN_REPLICAS_ACK`), waiting
   * for them no longer than half the deadline from `askedAt` (when its oldest append was asked).
   */
  acknowledged<T>(command: StoreCommand, write: (client: OneConnection | RedisCommands<ItemStoreScripts>) => Promise<T>, askedAt?: number): Promise<T>
  /**
   * Rejects with `InconsistentListError` when the list's keys disagree, as one script sees them,
   * or when chunks are left without an index and a header (looked for only when both are absent).
   */
  check(command: StoreCommand): Promise<void>
  /**
   * A script's `send` without a list id, the common case; when it found no layout to work on (it
   * wrote nothing then: a list's first write, or an earlier version's list still at the key), the
   * chunk keys are looked for (a new list would number its chunks among any left there, so they
   * are refused), and it is sent again with a fresh id, with which it makes the layout.
   */
  withLayout<T>(command: StoreCommand, send: (listId: string) => Promise<T | typeof NO_LAYOUT>): Promise<T>
  /** Makes the layout exist, and moves up to `chunks` chunks' worth of an earlier version's list in. */
  migrateStep(chunks: number): Promise<MigrationProgress>
  /**
   * Every chunk key of the list, whatever its number and whether the index names it, a SCAN step
   * at a time (each step's keys, maybe none); a key there for the whole scan comes at least once.
   */
  chunkKeys(command: StoreCommand): AsyncGenerator<ChunkKey[], void, undefined>
}

/** A chunk key a SCAN found, and its number. */
export interface ChunkKey {
  key: string
  number: number
}

export interface ListClientSettings {
  /** `ITEMS_KEY`: where the list lives (its index; the chunks and the rest under `<key>:`). */
  key: string
  /** `ITEMS_MIN_REPLICAS_ACK`: replicas that must hold an append before it resolves; 0, none. */
  minReplicasAck?: number
  /**
   * The connection appends are sent on when `minReplicasAck` is above 0 (the store's own
   * otherwise): `WAIT` blocks the connection it runs on, so waiting replicas would hold up
   * every read queued behind it, and a primary without replicas would get the whole store set
   * aside, `/ready` included, for want of a copy.
   */
  appends?: RedisConnection<ItemStoreScripts>
  /** `ITEMS_EVENTS_KEPT`: about how many events the list's stream keeps; DEFAULT_EVENTS_KEPT when not given. */
  eventsKept?: number
  /** Told of every command refused because the list's keys disagree, with how they disagree. */
  onInconsistent?: (command: StoreCommand, reason: string) => void
}

/** The `ListClient` of the list at `settings.key`, over `connection`. */
export function createListClient(connection: RedisConnection<ItemStoreScripts>, settings: ListClientSettings): ListClient {
  const { minReplicasAck = 0, appends = connection, onInconsistent: report, eventsKept = DEFAULT_EVENTS_KEPT } = settings
  const keys = listKeys(settings.key)
  const newListId = createListIdMinter()
  const sendAcknowledged = minReplicasAck > 0 ? createAcknowledgedAppends(appends, minReplicasAck) : undefined
  const run = <T>(command: StoreCommand, send: Send<T>) => refused(report, command, connection.run(command, send))
  const chunkKeys = (command: StoreCommand) => scanChunkKeys(run, keys, command)

  async function withLayout<T>(command: StoreCommand, send: (listId: string) => Promise<T | typeof NO_LAYOUT>): Promise<T> {
    const outcome = await send('')
    if (outcome !== NO_LAYOUT) return outcome
    await refuseLeftChunks(command)
    // Given an id, a script makes the layout (ensure()): it never answers NO_LAYOUT.
    return (await send(newListId())) as T
  }

  /** With no index and no header, a chunk key found is one they would have numbered: refused. */
  async function refuseLeftChunks(command: StoreCommand): Promise<void> {
    for await (const [found] of chunkKeys(command)) {
      if (found) throw inconsistent(report, command, `the index and the header are gone, and ${found.key} is still there`)
    }
  }

  return {
    keys,
    eventsKept,
    get epoch() {
      return connection.epoch
    },
    newListId,
    run,
    acknowledged: (command, write, askedAt) => (sendAcknowledged ? refused(report, command, sendAcknowledged(command, write, askedAt)) : run(command, write)),
    async check(command) {
      const reason = await run(command, (client) => client.check(keys))
      if (reason === NO_LAYOUT) return refuseLeftChunks(command)
      if (reason !== '') throw inconsistent(report, command, reason)
    },
    withLayout,
    migrateStep: (chunks) => withLayout('migrate_step', (listId) => run('migrate_step', (client) => client.migrateStep(keys, listId, chunks, eventsKept))),
    chunkKeys,
  }
}

/** `ListClient.chunkKeys`: a SCAN over the list's chunk pattern, only lists, each step's numbered keys. */
async function* scanChunkKeys(run: ListClient['run'], keys: ListKeys, command: StoreCommand): AsyncGenerator<ChunkKey[], void, undefined> {
  let cursor = '0'
  do {
    const step = await run(command, (client) => client.scan(cursor, { MATCH: keys.chunkPattern, COUNT: SCAN_STEP_KEYS, TYPE: 'list' }))
    cursor = step.cursor
    yield step.keys.flatMap((key) => {
      const number = keys.chunkNumber(key)
      return number === undefined ? [] : [{ key, number }]
    })
  } while (cursor !== '0')
}

/**
 * Mints list ids unique to the process and the call: a list deleted and made anew gets an id of
 * its own, and cursors into the old one are refused.
 */
function createListIdMinter(): () => string {
  const processId = randomBytes(9).toString('base64url')
  let made = 0
  return () => `${processId}${(made++).toString(36)}`
}

type Report = ListClientSettings['onInconsistent']

/** `sent`, a script's refusal (an error reply starting INCONSISTENT) as an `InconsistentListError`, reported. */
function refused<T>(report: Report, command: StoreCommand, sent: Promise<T>): Promise<T> {
  return sent.catch((error: unknown) => {
    const reply = error instanceof RedisUnavailableError && error.cause instanceof Error ? error.cause.message : ''
    if (!reply.startsWith(`${INCONSISTENT} `)) throw error
    // Redis adds where the script failed: the reason is what comes before.
    throw inconsistent(report, command, reply.slice(INCONSISTENT.length + 1).replace(/ script: .*$/s, ''))
  })
}

function inconsistent(report: Report, command: StoreCommand, reason: string): InconsistentListError {
  report?.(command, reason)
  return new InconsistentListError(reason)
}

/**
 * Runs a read's `send`; when an earlier version's list still sits at the key (Redis answers
 * WRONGTYPE), moves it aside first and sends again.
 */
export function onLayout<T>(list: ListClient, command: StoreCommand, send: Send<T>): Promise<T> {
  return list.run(command, send).catch(async (error: unknown) => {
    if (!isWrongType(error)) throw error
    await list.migrateStep(0)
    return list.run(command, send)
  })
}

/** Redis answering that the key holds another type: an earlier version's list, not yet moved aside. */
function isWrongType(error: unknown): boolean {
  return error instanceof RedisUnavailableError && error.cause instanceof Error && error.cause.message.startsWith('WRONGTYPE')
}
