import { createHash } from 'node:crypto'
import { defineScript, type CommandParser, type RedisScripts } from 'redis'
import type { RedisCommands, RedisConnection } from '@repo/service-kit'
import type { StoreCommand } from './metrics.ts'

/** What became of an append made under an idempotency key. */
export type OnceOutcome = 'appended' | 'replayed' | 'conflict'

/**
 * The ordered list of item names. Every method rejects with service-kit's
 * `RedisUnavailableError` when Redis cannot be reached, refuses the command or misses its deadline,
 * and an append also when fewer replicas than asked confirm it in time.
 */
export interface ItemStore {
  /** Appends `name` at the end of the list. */
  append(name: string): Promise<void>
  /**
   * Appends `name` unless `key` was already used: `replayed` when it was, for the same name
   * (nothing appended), `conflict` when for another name. The append and the record of the key
   * are one atomic step, so an append is never stored without its key or the other way round.
   */
  appendOnce(name: string, key: string): Promise<OnceOutcome>
  /** Every name, in insertion order. */
  list(): Promise<string[]>
  /** Removes every occurrence of `name` in one atomic step; resolves to how many were removed. */
  removeAll(name: string): Promise<number>
  /** Resolves when Redis answers PING. */
  ping(): Promise<void>
}

/** The append-once script's arguments and answer, spelled out so that its type can be named. */
interface AppendOnceScript {
  parseCommand(this: void, parser: CommandParser, list: string, record: string, name: string, fingerprint: string, ttlSeconds: number): void
  transformReply(this: void, reply: unknown): OnceOutcome
}

/**
 * KEYS: the list, the key's record. ARGV: the name, its fingerprint, the record's lifetime (s).
 * Run as one script, the append and the record are stored together or not at all, and AOF
 * keeps them together across a crash: a client that retries after a lost answer finds the
 * record and gets the first answer again instead of a second append. A replay rewrites the
 * record as it is: a `WAIT` after it then waits for the replicas to hold the record, wherever
 * and whenever the first append was made, rather than for this connection's last write.
 */
const APPEND_ONCE: RedisScripts[string] & AppendOnceScript = defineScript({
  SCRIPT: `
local recorded = redis.call('GET', KEYS[2])
if recorded then
  if recorded ~= ARGV[2] then return 'conflict' end
  redis.call('SET', KEYS[2], recorded, 'KEEPTTL')
  return 'replayed'
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 'appended'
`,
  NUMBER_OF_KEYS: 2,
  parseCommand(parser: CommandParser, list: string, record: string, name: string, fingerprint: string, ttlSeconds: number) {
    parser.pushKey(list)
    parser.pushKey(record)
    parser.push(name, fingerprint, String(ttlSeconds))
  },
  transformReply: (reply: unknown) => String(reply) as OnceOutcome,
})

/** The Lua scripts the store's connection must be opened with (`createRedisConnection`'s `scripts`). */
export type ItemStoreScripts = { appendOnce: typeof APPEND_ONCE }
export const ITEM_STORE_SCRIPTS: ItemStoreScripts = { appendOnce: APPEND_ONCE }

/** What an acknowledged append needs of a pipeline (node-redis `multi()`, sent with `execAsPipeline`). */
interface AppendPipeline {
  rPush(key: string, name: string): AppendPipeline
  appendOnce(list: string, record: string, name: string, fingerprint: string, ttlSeconds: number): AppendPipeline
  wait(replicas: number, timeoutMs: number): AppendPipeline
  execAsPipeline(): Promise<unknown[]>
}

/** A pipeline on a client or a Sentinel client: node-redis types `multi()` on their union as `any`. */
function pipelineOn(client: RedisCommands<ItemStoreScripts>): AppendPipeline {
  return 'acquire' in client ? client.multi() : client.multi()
}

export interface ItemStoreSettings {
  /** `ITEMS_KEY`: the Redis key of the list. */
  key: string
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
}

/** Fewer replicas than `ITEMS_MIN_REPLICAS_ACK` confirmed an append within the wait. */
export class ReplicasBehindError extends Error {
  override readonly name = 'ReplicasBehindError'
}

const nothing = (): void => {}

/**
 * What identifies a request under one key: its name, the only field an append reads (other
 * fields are ignored, so a body that differs only by them is the same request). Hashed so that a
 * record stays small whatever the name.
 */
function fingerprintOf(name: string): string {
  return createHash('sha256').update(name).digest('base64url')
}

/**
 * The `ItemStore` on a Redis list, over `connection` (which owns the deadline, the reconnection
 * and the outage logs). Each method is one Redis command, sent through `connection.run` under its
 * `StoreCommand` name, which is how `items_store_commands_total` counts it.
 */
export function createItemStore(connection: RedisConnection<ItemStoreScripts>, settings: ItemStoreSettings): ItemStore {
  const { key, idempotencyTtlSeconds, minReplicasAck = 0, appends = connection } = settings
  const run = <T>(command: StoreCommand, send: (client: RedisCommands<ItemStoreScripts>) => Promise<T>) => connection.run(command, send)
  // Half the deadline: a WAIT that runs out is answered (503) before the deadline sets Redis aside.
  const waitMs = Math.max(1, Math.floor(appends.deadlineMs / 2))

  /**
   * `write` alone, or `write` then `WAIT` in one pipeline: written together on one socket, the
   * WAIT counts replicas for this write and never for a fresh connection's (which has written
   * nothing, so any replica would do). A Sentinel client that loses the primary mid-pipeline
   * sends the whole pipeline again to the new one, where the script finds its record or appends.
   */
  function acknowledged<T>(command: StoreCommand, write: (client: RedisCommands<ItemStoreScripts>) => Promise<T>, queue: (pipeline: AppendPipeline) => AppendPipeline): Promise<T> {
    if (minReplicasAck === 0) return run(command, write)
    return appends.run(command, async (client) => {
      const [written, replicas] = (await queue(pipelineOn(client)).wait(minReplicasAck, waitMs).execAsPipeline()) as [T, number]
      if (replicas < minReplicasAck) throw new ReplicasBehindError(`${replicas} of ${minReplicasAck} replicas confirmed the append within ${waitMs} ms`)
      return written
    })
  }

  return {
    append(name) {
      // The list's new length is not the caller's business; no async wrapper around the command.
      return acknowledged('rpush', (client) => client.rPush(key, name), (pipeline) => pipeline.rPush(key, name)).then(nothing)
    },
    appendOnce(name, idempotencyKey) {
      const record = `${key}:idempotency:${idempotencyKey}`
      const args = [key, record, name, fingerprintOf(name), idempotencyTtlSeconds] as const
      return acknowledged('append_once', (client) => client.appendOnce(...args), (pipeline) => pipeline.appendOnce(...args))
    },
    list() {
      return run('lrange', (client) => client.lRange(key, 0, -1))
    },
    removeAll(name) {
      // LREM with count 0 removes every occurrence and reports how many: one atomic step,
      // so concurrent deletes of one name cannot both see it.
      return run('lrem', (client) => client.lRem(key, 0, name))
    },
    async ping() {
      await run('ping', (client) => client.ping())
    },
  }
}
