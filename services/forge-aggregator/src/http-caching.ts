import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CacheAnswer, ResponseCache } from './response-cache.ts'

/** RFC 9211: the name this cache signs its `Cache-Status` entries with. */
export const CACHE_NAME = 'forge-aggregator'

/**
 * Sends `answer` with what a caller's cache needs (DESIGN §4, §7). A complete answer carries its
 * `ETag` and `Cache-Control: public, max-age=<seconds it stays fresh here>` (`private` when it
 * shows a private repository), and a matching `If-None-Match` gets 304 without a body. A stale
 * answer says its `Age` and `max-age=0`. A partial answer is `no-store` and names what is
 * missing in `X-Forge-Partial`. Every answer says how it was obtained in `Cache-Status`.
 */
export function sendCachedAnswer(request: FastifyRequest, reply: FastifyReply, cache: ResponseCache, answer: CacheAnswer): FastifyReply {
  const { response } = answer
  reply.header('cache-status', cacheStatus(cache, answer))
  if (response.partial.length > 0) {
    return reply
      .headers({ 'cache-control': 'no-store', 'x-forge-partial': response.partial.join(', ') })
      .type('application/json; charset=utf-8')
      .send(response.body)
  }

  const scope = response.isPrivate ? 'private' : 'public'
  if (answer.result === 'stale') {
    reply.headers({ etag: response.etag, 'cache-control': `${scope}, max-age=0`, age: String(cache.ageOf(response)) })
  } else {
    reply.headers({ etag: response.etag, 'cache-control': `${scope}, max-age=${cache.secondsLeft(response)}` })
  }
  if (matchesEtag(request.headers['if-none-match'], response.etag)) return reply.code(304).send()
  return reply.type('application/json; charset=utf-8').send(response.body)
}

/** The `Cache-Status` of an answer (RFC 9211, in the terms DESIGN §7 fixes). */
function cacheStatus(cache: ResponseCache, answer: CacheAnswer): string {
  switch (answer.result) {
    case 'hit':
      return `${CACHE_NAME}; hit; ttl=${cache.secondsLeft(answer.response)}`
    case 'miss':
      return answer.stored ? `${CACHE_NAME}; fwd=miss; stored` : `${CACHE_NAME}; fwd=miss`
    case 'collapsed':
      return `${CACHE_NAME}; fwd=miss; collapsed`
    case 'revalidated':
      return answer.stored ? `${CACHE_NAME}; fwd=stale; stored` : `${CACHE_NAME}; fwd=stale`
    case 'stale':
      return answer.staleBecause === 'budget'
        ? `${CACHE_NAME}; hit; fwd=stale; detail=budget`
        : `${CACHE_NAME}; hit; fwd=stale${answer.failedStatus === undefined ? '' : `; fwd-status=${answer.failedStatus}`}; detail=stale-if-error`
  }
}

/** RFC 9110 §13.1.2: `*`, or any listed tag equal to ours under weak comparison. */
function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  if (ifNoneMatch.trim() === '*') return true
  return ifNoneMatch.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === etag)
}
