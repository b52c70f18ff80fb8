// The background move of an earlier version's list into chunks, from a replica's start until
// none is left, retried while Redis refuses, each failure logged once.
import type { FastifyBaseLogger } from 'fastify'
import type { ItemStore } from './item-store.ts'

/** A migration that Redis interrupted is tried again after 50 ms, then twice as long each time, up to 1 s. */
const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 1_000

/**
 * Moves an earlier version's list into the chunks in the background, from the start of the
 * process, so that an upgrade completes even when no request comes (reads and deletes that reach
 * the unmoved part move it themselves). Every step is one atomic script, so a replica that dies
 * mid-way leaves nothing half-moved, and replicas migrating at once only share the work. Waits
 * while Redis is unavailable (`isAvailable`), without sending anything, and tries again when a
 * step fails: the failure is logged when it first happens or changes, not at every try (a try a
 * second for as long as the keys disagree would bury the log), and the recovery once. Returns what
 * stops it.
 */
export function migrateInBackground(store: ItemStore, isAvailable: () => boolean, log: FastifyBaseLogger): () => void {
  let stopped = false
  let retry: NodeJS.Timeout | undefined
  let failing: string | undefined
  const attempt = (delayMs: number): void => {
    const again = () => {
      if (!stopped) retry = setTimeout(() => attempt(Math.min(MAX_RETRY_MS, delayMs * 2)), delayMs).unref()
    }
    // Not a command sent to a Redis known to be away: it would count as the store failing.
    if (!isAvailable()) return again()
    store.migrate().then(
      (moved) => {
        if (failing !== undefined) log.info("the move of an earlier version's list into chunks goes on again")
        if (moved > 0) log.info({ names: moved }, "an earlier version's list is moved into chunks")
      },
      (error: unknown) => {
        // The store rejects with errors only (RedisUnavailableError, InconsistentListError).
        const reason = (error as Error).message
        if (reason !== failing) log.warn({ reason }, "the move of an earlier version's list into chunks failed; trying again every second at most")
        failing = reason
        again()
      },
    )
  }
  attempt(FIRST_RETRY_MS)
  return () => {
    stopped = true
    clearTimeout(retry)
  }
}
