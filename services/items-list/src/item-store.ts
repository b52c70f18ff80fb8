import { createHash } from 'node:crypto'
import { defineScript, type CommandParser, type RedisScripts } from 'redis'
import type { RedisClient, RedisConnection } from '@repo/service-kit'
import type { StoreCommand } from './store-metrics.ts'

/** What became of an append made under an idempotency key. */
export type OnceOutcome = 'appended' | 'replayed' | 'conflict'

/**
 * The ordered list of item names. Every method rejects with service-kit's
 * `RedisUnavailableError` when Redis cannot be reached, refuses the command or misses its deadline.
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
 * record and gets the first answer again instead of a second append.
 */
const APPEND_ONCE: RedisScripts[string] & AppendOnceScript = defineScript({
  SCRIPT: `
local recorded = redis.call('GET', KEYS[2])
if recorded then
  if recorded == ARGV[2] then return 'replayed' end
  return 'conflict'
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

export interface ItemStoreSettings {
  /** `ITEMS_KEY`: the Redis key of the list. */
  key: string
  /** `IDEMPOTENCY_TTL_SECONDS`: how long an idempotency key is remembered after its append. */
  idempotencyTtlSeconds: number
}

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
  const { key, idempotencyTtlSeconds } = settings
  const run = <T>(command: StoreCommand, send: (client: RedisClient<ItemStoreScripts>) => Promise<T>) => connection.run(command, send)

  return {
    async append(name) {
      await run('rpush', (client) => client.rPush(key, name))
    },
    appendOnce(name, idempotencyKey) {
      const record = `${key}:idempotency:${idempotencyKey}`
      return run('append_once', (client) => client.appendOnce(key, record, name, fingerprintOf(name), idempotencyTtlSeconds))
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
