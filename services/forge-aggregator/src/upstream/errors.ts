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
