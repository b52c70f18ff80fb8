import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CachedResponse, ResponseCache } from './response-cache.ts'

/**
 * Sends `response` with what a caller's cache needs. A complete answer carries its `ETag` and
 * `Cache-Control: public, max-age=<seconds it stays fresh here>` (`private` when it shows a
 * private repository), and a matching
 * `If-None-Match` gets 304 without a body. A partial answer is `no-store` and names what is
 * missing in `X-Forge-Partial`.
 */
export function sendCachedResponse(
  request: FastifyRequest,
  reply: FastifyReply,
  cache: ResponseCache,
  response: CachedResponse,
): FastifyReply {
  if (response.partial.length > 0) {
    return reply
      .headers({ 'cache-control': 'no-store', 'x-forge-partial': response.partial.join(', ') })
      .type('application/json; charset=utf-8')
      .send(response.body)
  }

  const scope = response.isPrivate ? 'private' : 'public'
  reply.headers({ etag: response.etag, 'cache-control': `${scope}, max-age=${cache.secondsLeft(response)}` })
  if (matchesEtag(request.headers['if-none-match'], response.etag)) return reply.code(304).send()
  return reply.type('application/json; charset=utf-8').send(response.body)
}

/** RFC 9110 §13.1.2: `*`, or any listed tag equal to ours under weak comparison. */
function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  if (ifNoneMatch.trim() === '*') return true
  return ifNoneMatch.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === etag)
}
