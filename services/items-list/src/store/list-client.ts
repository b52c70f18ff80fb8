import { randomBytes } from 'node:crypto'
import { RedisUnavailableError, type RedisCommands, type RedisConnection } from '@repo/service-kit'
import { createAcknowledgedAppends, type OneConnection } from './acknowledged-appends.ts'
import { InconsistentListError } from './errors.ts'
import { INCONSISTENT, listKeys, NO_LAYOUT, type ItemStoreScripts, type ListKeys, type MigrationProgress } from './layout.ts'
import type { StoreCommand } from './metrics.ts'

/** Chunks a migration step moves: about 2 ms of Redis's time for names of 16 bytes. */
export const MIGRATE_STEP_CHUNKS = 8

/** What the store's parts send on the list's connection: commands on one client, answered together. */
type Send<T> = (client: RedisCommands<ItemStoreScripts>) => Promise<T>

/**
 * One list's keys, and how the store's parts send commands about it: each under its `StoreCommand`
 * name (which is how `items_store_commands_total` counts it), a script's refusal (an error reply
 * starting INCONSISTENT) turned into an `InconsistentListError` and reported.
 */
export interface ListClient {
  keys: ListKeys
  /** The connection's epoch: it goes up when Redis may hold less than was read from it. */
  readonly epoch: number
  /** An id for a script to give the list if it is the one to make it (`ensure()`). */
  newListId(): string
  run<T>(command: StoreCommand, send: Send<T>): Promise<T>
  /** `write`, resolved at once, or once enough replicas hold it (`ITEMS_MIN_REPLICAS_ACK`). */
  acknowledged<T>(command: StoreCommand, write: (client: OneConnection | RedisCommands<ItemStoreScripts>) => Promise<T>): Promise<T>
  /** Rejects with `InconsistentListError` when the list's keys disagree, as one script sees them. */
  check(command: StoreCommand): Promise<void>
  /** Makes the layout exist, and moves up to `chunks` chunks' worth of an earlier version's list in. */
  migrateStep(chunks: number): Promise<MigrationProgress>
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
  /** Told of every command refused because the list's keys disagree, with how they disagree. */
  onInconsistent?: (command: StoreCommand, reason: string) => void
}

/** The `ListClient` of the list at `settings.key`, over `connection`. */
export function createListClient(connection: RedisConnection<ItemStoreScripts>, settings: ListClientSettings): ListClient {
  const { minReplicasAck = 0, appends = connection, onInconsistent: report } = settings
  const keys = listKeys(settings.key)
  const newListId = createListIdMinter()
  const sendAcknowledged = minReplicasAck > 0 ? createAcknowledgedAppends(appends, minReplicasAck) : undefined
  const run = <T>(command: StoreCommand, send: Send<T>) => refused(report, command, connection.run(command, send))
  return {
    keys,
    get epoch() {
      return connection.epoch
    },
    newListId,
    run,
    acknowledged: (command, write) => (sendAcknowledged ? refused(report, command, sendAcknowledged(command, write)) : run(command, write)),
    async check(command) {
      const reason = await run(command, (client) => client.check(keys))
      if (reason !== undefined) throw inconsistent(report, command, reason)
    },
    migrateStep: (chunks) => run('migrate_step', (client) => client.migrateStep(keys, newListId(), chunks)),
  }
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

/**
 * An append's `send` without a list id, the common case; sent again with a fresh one when the
 * script found no layout to append to (it wrote nothing then: a list's first append, or an earlier
 * version's list still at the key).
 */
export async function withLayout<T>(list: ListClient, send: (listId: string) => Promise<T | typeof NO_LAYOUT>): Promise<T> {
  const outcome = await send('')
  if (outcome !== NO_LAYOUT) return outcome
  // Given an id, a script makes the layout (ensure()): it never answers 'nolayout'.
  return (await send(list.newListId())) as T
}

/** Redis answering that the key holds another type: an earlier version's list, not yet moved aside. */
function isWrongType(error: unknown): boolean {
  return error instanceof RedisUnavailableError && error.cause instanceof Error && error.cause.message.startsWith('WRONGTYPE')
}
