import type { ForgeAggregatorConfig } from '../config.ts'

/** Bytes each in-process cache may hold, out of `FORGE_CACHE_MAX_MB`. */
export interface CacheMemory {
  /** The assembled answers (`ResponseCache`). */
  answerBytes: number
  /** The upstream bodies held for revalidation (`ForgeClient`). */
  revalidationMaxBytes: number
}

/** Assembled answers are small, upstream bodies are not: a quarter for answers, the rest for bodies. */
const ANSWER_SHARE = 0.25

/**
 * How `FORGE_CACHE_MAX_MB` is split between the two caches: defined here, applied by `buildApp`.
 * Caching off (TTL 0) holds no body for revalidation either.
 */
export function cacheMemory(config: Pick<ForgeAggregatorConfig, 'FORGE_CACHE_MAX_MB' | 'FORGE_CACHE_TTL_SECONDS'>): CacheMemory {
  const total = config.FORGE_CACHE_MAX_MB * 1024 * 1024
  return {
    answerBytes: total * ANSWER_SHARE,
    revalidationMaxBytes: config.FORGE_CACHE_TTL_SECONDS === 0 ? 0 : total * (1 - ANSWER_SHARE),
  }
}
