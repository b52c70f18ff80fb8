import type { ForgeAggregatorConfig } from '../config.ts'

/** Bytes each in-process cache may hold, out of `FORGE_CACHE_MAX_MB`, and how long held bodies live. */
export interface CacheMemory {
  /** The assembled answers (`ResponseCache`). */
  answerBytes: number
  /** The upstream bodies held for revalidation (`ForgeClient`). */
  revalidationMaxBytes: number
  /**
   * How long a held body the replicas share outlives its last use (ms): twice the answer TTL, a
   * day at least, so that the revalidation of an answer whose TTL has just run out still finds
   * its ETags, even for an answer asked for a while after that.
   */
  heldForMs: number
}

/** Assembled answers are small, upstream bodies are not: a quarter for answers, the rest for bodies. */
const ANSWER_SHARE = 0.25
const DAY_MS = 24 * 60 * 60 * 1000

/**
 * How `FORGE_CACHE_MAX_MB` is split between the two caches: defined here, applied by `buildApp`.
 * Caching off (TTL 0) holds no body for revalidation either.
 */
export function cacheMemory(config: Pick<ForgeAggregatorConfig, 'FORGE_CACHE_MAX_MB' | 'FORGE_CACHE_TTL_SECONDS'>): CacheMemory {
  const total = config.FORGE_CACHE_MAX_MB * 1024 * 1024
  return {
    answerBytes: total * ANSWER_SHARE,
    revalidationMaxBytes: config.FORGE_CACHE_TTL_SECONDS === 0 ? 0 : total * (1 - ANSWER_SHARE),
    heldForMs: Math.max(DAY_MS, 2 * config.FORGE_CACHE_TTL_SECONDS * 1000),
  }
}
