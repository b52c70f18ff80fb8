import type { RateLimitRedis } from '@repo/service-kit'

/**
 * What replicas share (DESIGN §7): answers, held upstream bodies, the rate-limit budget and the
 * production locks. Every method is best effort and never throws: a store that cannot answer
 * (down, hung, not yet connected) reads as empty and writes nothing, and the caller carries on
 * with what its own process knows.
 */
export interface SharedStore {
  /** Whether the store answers now (connected, subscribed, not set aside for missing a deadline). */
  readonly isAvailable: boolean
  /** The value at `key`, or undefined when there is none or the store cannot say. */
  get(key: string): Promise<string | undefined>
  /** Writes `value` at `key` for `ttlMs`; resolves once written, or once the store cannot say. */
  set(key: string, value: string, ttlMs: number): Promise<void>
  /** Removes `key`; does not wait for the store. */
  delete(key: string): void
  /**
   * Takes the production lock of `key` for `ttlMs`: resolves to the lock's token when taken,
   * false when another replica holds it, undefined when the store cannot say (then produce alone).
   */
  lock(key: string, ttlMs: number): Promise<string | false | undefined>
  /** Releases the lock `token` holds on `key` and tells every replica waiting on it that its production ended. */
  release(key: string, token: string): void
  /**
   * Resolves when a replica announces the end of `key`'s production, or the store can no longer
   * tell (true), or after `timeoutMs` or `cancel` (false). Call it before `lock`, so that an end
   * announced in between is not missed.
   */
  waitForRelease(key: string, timeoutMs: number): { done: Promise<boolean>; cancel(): void }
  /** The connection the rate limit counts on (`RATE_LIMIT_PER_MINUTE`), so replicas count each client together. */
  readonly rateLimitRedis: RateLimitRedis
  /** Closes the connections. */
  close(): Promise<void>
}
