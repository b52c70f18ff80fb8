// The list's change feed as the store reads it (docs/events.md): the list and its events stream
// read together, the stream's entries read after a point, and each replica's one blocking reader,
// which hands every new entry to the replica's watchers.
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { RedisClient, RedisConnection } from '@repo/service-kit'
import { type EVENT_APPEND, type EVENT_MOVED, type EVENT_REMOVE, type EVENT_RESET } from './events-emit.ts'
import type { FeedState, SnapshotStep } from './events-read.ts'
import type { ListClient } from './list-client.ts'
import type { ItemStoreScripts } from './scripts.ts'

export type { FeedState, SnapshotStep } from './events-read.ts'

/** A stream entry: its id, its type, and its pairs (a position and a name; a position and '' for a removal). */
export interface FeedEntry {
  id: string
  type: typeof EVENT_APPEND | typeof EVENT_REMOVE | typeof EVENT_RESET | typeof EVENT_MOVED
  pairs: [at: string, name: string][]
}

/** What the feed reads, each one round trip of bounded commands. */
export interface FeedReads {
  state(): Promise<FeedState>
  /** Up to SNAPSHOT_STEP_CHUNKS chunks from `chunk` (from `offset` in it), with the state read with them. */
  snapshotStep(chunk: number, offset: number): Promise<SnapshotStep>
  /** Up to `count` entries from `from` on (`from` itself included; '-' from the first kept). */
  range(from: string, count: number): Promise<FeedEntry[]>
}

/** Chunks a snapshot step reads: up to 4,000 names, about 1 ms of Redis's time for names of 16 bytes. */
export const SNAPSHOT_STEP_CHUNKS = 4

export function createFeedReads(list: ListClient): FeedReads {
  const { keys } = list
  return {
    state: () => list.run('events_state', (client) => client.feedState(keys)),
    snapshotStep: (chunk, offset) => list.run('events_snapshot', (client) => client.snapshotStep(keys, chunk, offset, SNAPSHOT_STEP_CHUNKS)),
    // XRANGE of a stream not there answers an empty array, never null.
    range: async (from, count) => ((await list.run('events_read', (client) => client.xRange(keys.events, from, '+', { COUNT: count }))) as StreamMessage[]).map(decodeEntry),
  }
}

interface StreamMessage {
  id: string
  message: Record<string, string>
}

function decodeEntry({ id, message }: StreamMessage): FeedEntry {
  const pairs: [string, string][] = []
  let type = ''
  // The fields in the order they were written: `t` first, then the positions (never numbers of
  // JavaScript's index form: they start with zeros), each once.
  for (const [field, value] of Object.entries(message)) {
    if (field === 't') type = value
    else pairs.push([field, value])
  }
  return { id, type: type as FeedEntry['type'], pairs }
}

/** Compares two stream ids (`<ms>-<seq>`): negative, 0 or positive. */
export function compareIds(a: string, b: string): number {
  const [aMs, aSeq] = a.split('-').map(Number) as [number, number]
  const [bMs, bSeq] = b.split('-').map(Number) as [number, number]
  return aMs - bMs || aSeq - bSeq
}

/** What the reader tells each watcher: an entry, or that Redis lost entries it had handed out (a failover). */
export interface FeedListener {
  entry(entry: FeedEntry): void
  lost(): void
}

export interface FeedReader {
  /**
   * Starts the reader the first time (a replica nobody watches sends nothing), and resolves once it
   * knows where the stream stands (the entries after that reach every listener); rejects when
   * Redis does not answer (`RedisUnavailableError`: 503).
   */
  ready(): Promise<void>
  listen(listener: FeedListener): () => void
  /**
   * Seconds since the epoch of the reader's last round (an answer from Redis, a blocking read's
   * timeout, or a failed read); now, before the reader has started.
   */
  readonly lastAnswer: number
  stop(): void
}

/** How long one blocking read waits for an entry before it asks again. */
const BLOCK_MS = 5_000
const READ_COUNT = 500
const RETRY_MS = 250

/**
 * The replica's one reader of the events stream: `XREAD BLOCK` on a connection of its own (a
 * blocking read would hold up every command queued behind it), from the last id it read, handing
 * each entry to every listener. An idle listener costs no command. After a failed read it reads
 * the stream's state again: a last id lower than its own means the Redis it reads now lost entries
 * it handed out (a failover, a restart without them), and every listener is told.
 */
export function createFeedReader(connection: RedisConnection<ItemStoreScripts>, reads: FeedReads, key: string, logger: FastifyBaseLogger): FeedReader {
  const listeners = new Set<FeedListener>()
  // A connection of its own: duplicate() gives a client with the same settings, closed with the store's.
  let duplicated: RedisClient | undefined
  const connectionOf = () => (duplicated ??= connection.duplicate() as unknown as RedisClient)
  let stopped = false
  let cursor: string | undefined
  let lastAnswer = Date.now() / 1000
  let starting: Promise<void> | undefined

  async function loop(): Promise<void> {
    while (!stopped) {
      try {
        const client = connectionOf()
        // Not ready (reconnecting): the read fails, and is tried again below.
        if (!client.isOpen) await client.connect()
        const reply = await client.xRead({ key, id: cursor! }, { BLOCK: BLOCK_MS, COUNT: READ_COUNT })
        lastAnswer = Date.now() / 1000
        for (const stream of (reply ?? []) as { messages: { id: string; message: Record<string, string> }[] }[]) {
          for (const message of stream.messages) {
            const entry = decodeEntry(message)
            cursor = entry.id
            for (const listener of listeners) listener.entry(entry)
          }
        }
      } catch (error) {
        if (stopped) return
        logger.debug({ err: error }, 'the events reader failed a read: trying again')
        await sleep(RETRY_MS)
        await checkLost()
        // Not stuck: it goes round, Redis away (ItemsStoreDown says so).
        lastAnswer = Date.now() / 1000
      }
    }
  }

  async function checkLost(): Promise<void> {
    // Redis still away: the next failed read asks again.
    const state = await reads.state().catch(() => undefined)
    if (!state || compareIds(state.last, cursor!) >= 0) return
    logger.warn({ last: state.last, read: cursor }, 'the events stream lost entries this replica had read (a failover or a restart): every watcher starts again')
    cursor = state.last
    for (const listener of listeners) listener.lost()
  }

  return {
    ready() {
      // Started by the first stream; a start that failed (Redis away) is tried again by the next.
      starting ??= reads.state().then(
        ({ last }) => {
          cursor = last
          if (!stopped) void loop()
        },
        (error: unknown) => {
          starting = undefined
          throw error
        },
      )
      return starting
    },
    listen(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    get lastAnswer() {
      // Not started (nobody has watched this replica): nothing to be stuck.
      return starting === undefined ? Date.now() / 1000 : lastAnswer
    },
    stop() {
      stopped = true
      // The blocking read is cut short: nothing waits for its answer.
      if (duplicated?.isOpen) duplicated.destroy()
    },
  }
}
