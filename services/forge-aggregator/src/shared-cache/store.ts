import { Counter, type Registry } from 'prom-client'
import type { RedisConnection } from '@repo/service-kit'
import type { StoredEntry, StoredKind } from './stored.ts'

/**
 * What replicas share in Redis (docs/design.md, "Sharing across replicas"): answers, held
 * projections of upstream bodies, the rate-limit budgets and a public App's lookups, each under
 * the deployment's namespace and with an expiry. Best effort: a Redis that cannot answer reads as
 * empty and writes nothing, and the caller carries on with what its own process knows. Every
 * value read is checked against its schema: one that fails is a miss, and counted.
 */
export interface SharedStore {
  /** The value at `key` when it passes `entry`'s schema; undefined when absent, rejected, or Redis cannot say. */
  get<T>(entry: StoredEntry<T>, key: string): Promise<T | undefined>
  /** Writes `value` at `key` for `ttlMs`; resolves once written, or once Redis cannot say. */
  set(key: string, value: string, ttlMs: number): Promise<void>
  /** Removes `key`; does not wait for Redis. */
  delete(key: string): void
  /**
   * Like `get`, but rejects when Redis cannot say, and does not count a rejected value: for a
   * change that must not be taken for done when it was not (a webhook drop).
   */
  read<T>(entry: StoredEntry<T>, key: string): Promise<T | undefined>
  /** Like `set`, but rejects when Redis cannot say. */
  write(key: string, value: string, ttlMs: number): Promise<void>
}

/** A `SharedStore` on `connection`, its keys under `namespace`; rejected entries counted in `registry`. */
export function createSharedStore(connection: RedisConnection, namespace: string, registry: Registry): SharedStore {
  const rejected = new Counter({
    name: 'forge_shared_entries_rejected_total',
    help: 'Entries read from Redis that were not JSON or failed their schema, read as misses',
    labelNames: ['kind'] as const,
    registers: [registry],
  })
  const kinds: readonly StoredKind[] = ['answer', 'held', 'budget', 'installation']
  for (const kind of kinds) rejected.inc({ kind }, 0)

  const readText = (key: string) => connection.run('GET', (client) => client.get(namespace + key))
  const writeText = async (key: string, value: string, ttlMs: number) => {
    await connection.run('SET', (client) => client.set(namespace + key, value, { expiration: { type: 'PX', value: Math.max(1, Math.ceil(ttlMs)) } }))
  }
  // Best effort: a Redis that cannot answer (the connection logs it and sets Redis aside) reads as empty.
  const orNothing = () => undefined

  return {
    async get(entry, key) {
      const text = await readText(key).catch(orNothing)
      if (text === undefined || text === null) return undefined
      const value = entry.parse(text)
      if (value === undefined) rejected.inc({ kind: entry.kind })
      return value
    },
    async set(key, value, ttlMs) {
      await writeText(key, value, ttlMs).catch(orNothing)
    },
    delete(key) {
      void connection.run('DEL', (client) => client.del(namespace + key)).catch(orNothing)
    },
    async read(entry, key) {
      const text = await readText(key)
      return text === null ? undefined : entry.parse(text)
    },
    write: writeText,
  }
}
