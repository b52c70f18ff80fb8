import { HttpError } from '@repo/http-errors'
import { CACHE_NAME } from '../cache/headers.ts'
import { BudgetSpent, UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from '../upstream/errors.ts'

/** What an endpoint says when the upstream fails it: the spec's messages per endpoint. */
export interface FailureMessages {
  /** The 404 message: "User not found" or "Repository not found". */
  notFound: string
  /** The 500 message: "Failed to fetch forge data", "… repository", "… repositories". */
  failure: string
}

const RATE_LIMITED = 'API rate limit exceeded or access forbidden'

/** An invalid request never reaches the cache, and its `Cache-Status` says so (RFC 9211 `fwd=bypass`). */
export function invalidRequest(message: string): HttpError {
  return new HttpError(400, { error: message }, { headers: { 'cache-status': `${CACHE_NAME}; fwd=bypass` } })
}

/** `Cache-Status` of an error: the upstream was asked and failed, or the budget forbade asking. */
const FORWARDED = { 'cache-status': `${CACHE_NAME}; fwd=miss` }
const NOT_FORWARDED = { 'cache-status': `${CACHE_NAME}; detail=budget` }

/**
 * An endpoint's HTTP answer to an upstream error, in its own words (`reply.sendAnswer`'s
 * `errorAnswer`); any other error is returned unchanged (a 500 of ours).
 */
export function upstreamErrorAnswer(messages: FailureMessages): (error: unknown) => unknown {
  return (error) => {
    if (error instanceof UpstreamNotFound) return new HttpError(404, { error: messages.notFound }, { headers: FORWARDED, cause: error })
    if (error instanceof UpstreamRateLimited) {
      const headers = {
        ...(error instanceof BudgetSpent ? NOT_FORWARDED : FORWARDED),
        ...(error.retryAfterSeconds === undefined ? {} : { 'retry-after': String(error.retryAfterSeconds) }),
      }
      return new HttpError(403, { error: RATE_LIMITED }, { headers, cause: error })
    }
    if (error instanceof UpstreamFailure) {
      return new HttpError(500, { error: messages.failure, details: error.message }, { headers: FORWARDED, cause: error })
    }
    return error
  }
}
