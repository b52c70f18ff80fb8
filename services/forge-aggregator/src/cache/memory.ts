import type { ForgeAggregatorConfig } from '../config.ts'

/**
 * How `FORGE_CACHE_MAX_MB` is shared between the caches of one process (docs/design.md,
 * "Caching").
 */

/** Bytes each in-process cache may hold, out of `FORGE_CACHE_MAX_MB`, and how long held projections live. */
export interface CacheMemory {
  /** The assembled answers (`ResponseCache`). */
  answerBytes: number
  /** The projections of upstream bodies held for revalidation (`ForgeClient`). */
  revalidationMaxBytes: number
  /**
   * How long a held projection the replicas share outlives its last use (ms): twice the answer TTL, a
   * day at least, so that the revalidation of an answer whose TTL has just run out still finds
   * its ETags, even for an answer asked for a while after that.
   */
  heldForMs: number
}

/**
 * A third for answers, the rest for held projections: an account of 30 repositories takes about
 * 6.6 KB of answer and 13 KB of projections (bench:bytes), so both caches hold about as many
 * accounts, and neither outlives the other's use. When whole bodies were held (~180 KB an account)
 * a quarter for answers still held ten times the accounts whose bodies fit.
 */
const ANSWER_SHARE = 1 / 3
const DAY_MS = 24 * 60 * 60 * 1000

/**
 * How `FORGE_CACHE_MAX_MB` is split between the two caches: defined here, applied by `buildApp`.
 * Caching off (TTL 0) holds no body for revalidation either.
 */
export function cacheMemory(config: Pick<ForgeAggregatorConfig, 'FORGE_CACHE_MAX_MB' | 'FORGE_CACHE_TTL_SECONDS'>): CacheMemory {
  const total = config.FORGE_CACHE_MAX_MB * 1024 * 1024
  // Whole bytes: lru-cache takes only an integer bound.
  const answerBytes = Math.floor(total * ANSWER_SHARE)
  return {
    answerBytes,
    revalidationMaxBytes: config.FORGE_CACHE_TTL_SECONDS === 0 ? 0 : total - answerBytes,
    heldForMs: Math.max(DAY_MS, 2 * config.FORGE_CACHE_TTL_SECONDS * 1000),
  }
}
