import type { ServedAnswer } from './response-cache.ts'

/**
 * The HTTP headers of a cached answer: its `Cache-Status` (RFC 9211) and whether a request's `If-
 * None-Match` matches it.
 */

/** RFC 9211: the name this cache signs its `Cache-Status` entries with. */
export const CACHE_NAME = 'forge-aggregator'

/** The `Cache-Status` of an answer (RFC 9211, in the terms of docs/design.md, "Caching"); `ttlSeconds` of a hit. */
export function cacheStatus(served: ServedAnswer, ttlSeconds: number): string {
  switch (served.result) {
    case 'hit':
      return `${CACHE_NAME}; hit; ttl=${ttlSeconds}`
    case 'miss':
      return served.stored ? `${CACHE_NAME}; fwd=miss; stored` : `${CACHE_NAME}; fwd=miss`
    case 'collapsed':
      return `${CACHE_NAME}; fwd=miss; collapsed`
    case 'revalidated':
      return served.stored ? `${CACHE_NAME}; fwd=stale; stored` : `${CACHE_NAME}; fwd=stale`
    case 'stale':
      return served.staleBecause === 'budget'
        ? `${CACHE_NAME}; hit; fwd=stale; detail=budget`
        : `${CACHE_NAME}; hit; fwd=stale${served.failedStatus === undefined ? '' : `; fwd-status=${served.failedStatus}`}; detail=stale-if-error`
  }
}

/** RFC 9110 §13.1.2: `*`, or any listed tag equal to ours under weak comparison. */
export function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  if (ifNoneMatch.trim() === '*') return true
  return ifNoneMatch.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === etag)
}
