import type { IncomingHttpHeaders } from 'node:http'
import { parseJson } from '../parse-json.ts'

/** Every way an upstream call can fail, as the routes need to tell them apart. */
export abstract class UpstreamError extends Error {
  /** The upstream's HTTP status, when it answered at all. */
  readonly status: number | undefined

  constructor(message: string, status?: number) {
    super(message)
    this.status = status
  }
}

/** The upstream answered 404: the user or repository does not exist. */
export class UpstreamNotFound extends UpstreamError {
  override readonly name: string = 'UpstreamNotFound'
}

/**
 * The upstream answered 403 or 429: rate limit exceeded or access forbidden.
 * `retryAfterSeconds` comes from its `Retry-After`, else from `X-RateLimit-Reset`.
 */
export class UpstreamRateLimited extends UpstreamError {
  override readonly name: string = 'UpstreamRateLimited'
  readonly retryAfterSeconds: number | undefined
  /** When calls may resume, on the wall clock (ms), when known. */
  readonly resumesAt: number | undefined

  constructor(message: string, retryAfterSeconds: number | undefined, status?: number, resumesAt?: number) {
    super(message, status)
    this.retryAfterSeconds = retryAfterSeconds
    this.resumesAt = resumesAt
  }
}

/**
 * The rate-limit budget of the resource a call needs is spent: the call was not made
 * (docs/design.md, "Rate-limit budget"). Answered like the upstream's own rate limit, `Retry-After`
 * being the reset.
 */
export class BudgetSpent extends UpstreamRateLimited {
  override readonly name: string = 'BudgetSpent'

  /** The error for a resource that may be called again at `resumesAt` (wall clock, ms). */
  static until(resumesAt: number, now: number): BudgetSpent {
    return new BudgetSpent('Upstream rate limit spent; not asking before its reset', Math.max(0, Math.ceil((resumesAt - now) / 1000)), undefined, resumesAt)
  }
}

/**
 * Anything else: 401, 5xx, an unexpected status, a timeout, a connection error, a body that is
 * not the JSON expected. The message is safe to show a caller: it never holds the token.
 */
export class UpstreamFailure extends UpstreamError {
  override readonly name: string = 'UpstreamFailure'
}

/**
 * GitHub would not mint a token for the installation: it is gone (404) or suspended (403). A
 * public App then calls about its account as about one without an installation.
 */
export class InstallationUnavailable extends UpstreamFailure {
  override readonly name: string = 'InstallationUnavailable'
}

/** GitHub: after a 429 or a secondary rate limit without `Retry-After`, "wait at least one minute". */
const DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
/** How much of an upstream's error message a failure repeats. */
const MAX_UPSTREAM_MESSAGE_LENGTH = 200

/** What may be said of a message: it never holds a credential, even one the upstream echoed. */
export type Redact = (message: string) => string

/** The failure an answer other than 200 or 304 is: its status, and the upstream's message, redacted. */
export function statusFailure(statusCode: number, headers: IncomingHttpHeaders, text: string, nowMs: number, redact: Redact): UpstreamError {
  const said = upstreamMessage(text)
  // Redacted before it is shortened: a credential the cut went through would no longer match.
  const reason = said === undefined ? `status ${statusCode}` : redact(said).slice(0, MAX_UPSTREAM_MESSAGE_LENGTH)
  const message = `Upstream responded ${statusCode}: ${reason}`
  if (statusCode === 404) return new UpstreamNotFound(message, statusCode)
  if (statusCode === 403 || statusCode === 429) {
    const seconds = retryAfterSeconds(statusCode, headers, text, nowMs)
    return new UpstreamRateLimited(message, seconds, statusCode, seconds === undefined ? undefined : nowMs + seconds * 1000)
  }
  return new UpstreamFailure(message, statusCode)
}

/**
 * The failure a call that got no answer is: a timeout after `timeoutMs`, or the transport's code.
 * Throws a programming error of ours as it is: it is not the upstream's failure (a 500 of ours).
 */
export function transportFailure(error: unknown, timedOut: boolean, timeoutMs: number, redact: Redact): UpstreamFailure {
  if (isProgrammingError(error)) throw error
  if (timedOut) return new UpstreamFailure(`Upstream did not answer within ${timeoutMs} ms`)
  const { code, message } = error as Error & { code?: string }
  return new UpstreamFailure(redact(`Upstream request failed: ${code ?? message}`))
}

/**
 * Seconds to wait before asking again (docs/design.md, "Errors"). `Retry-After` is authoritative when present.
 * Only a spent primary limit (`X-RateLimit-Remaining: 0`) makes `X-RateLimit-Reset` the answer:
 * a plain "forbidden" also carries a reset, and must not tell clients to wait an hour. A 429 or a
 * secondary rate limit without either waits GitHub's minute; anything else gets no advice.
 */
export function retryAfterSeconds(statusCode: number, headers: IncomingHttpHeaders, text: string, nowMs: number): number | undefined {
  const nowSeconds = nowMs / 1000
  const retryAfter = headers['retry-after']
  if (typeof retryAfter === 'string') {
    const seconds = /^\d+$/.test(retryAfter) ? Number(retryAfter) : Date.parse(retryAfter) / 1000 - nowSeconds
    if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds))
  }
  const reset = headers['x-ratelimit-reset']
  if (headers['x-ratelimit-remaining'] === '0' && typeof reset === 'string' && /^\d+$/.test(reset)) {
    return Math.max(0, Math.ceil(Number(reset) - nowSeconds))
  }
  if (statusCode === 429 || isSecondaryRateLimit(text)) return DEFAULT_RATE_LIMIT_WAIT_SECONDS
  return undefined
}

function isProgrammingError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof ReferenceError || error instanceof RangeError || error instanceof SyntaxError
}

/** The `message` of an upstream error body (`{"message": …}`); undefined if none. */
function upstreamMessage(text: string): string | undefined {
  const message = (parseJson(text) as { message?: unknown } | null | undefined)?.message
  return typeof message === 'string' ? message : undefined
}

/** GitHub's secondary rate limits answer 403 with a message saying so. */
function isSecondaryRateLimit(text: string): boolean {
  return /secondary rate limit/i.test(upstreamMessage(text) ?? '')
}
