/** Every way an upstream call can fail, as the routes need to tell them apart. */
export abstract class UpstreamError extends Error {}

/** The upstream answered 404: the user or repository does not exist. */
export class UpstreamNotFound extends UpstreamError {
  override readonly name = 'UpstreamNotFound'
}

/**
 * The upstream answered 403 or 429: rate limit exceeded or access forbidden.
 * `retryAfterSeconds` comes from its `Retry-After`, else from `X-RateLimit-Reset`.
 */
export class UpstreamRateLimited extends UpstreamError {
  override readonly name = 'UpstreamRateLimited'
  readonly retryAfterSeconds: number | undefined

  constructor(message: string, retryAfterSeconds: number | undefined) {
    super(message)
    this.retryAfterSeconds = retryAfterSeconds
  }
}

/**
 * Anything else: 401, 5xx, an unexpected status, a timeout, a connection error, a body that is
 * not the JSON expected. The message is safe to show a caller: it never holds the token.
 */
export class UpstreamFailure extends UpstreamError {
  override readonly name = 'UpstreamFailure'
}
