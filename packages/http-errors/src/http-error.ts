/**
 * An error that already knows its HTTP answer: the status, the exact JSON body and any extra
 * headers (for example `Retry-After`). Throw it from a route; the shared error handler sends it
 * as is. `cause` is logged, never sent.
 */
export class HttpError extends Error {
  readonly statusCode: number
  readonly body: Readonly<Record<string, unknown>>
  readonly headers: Readonly<Record<string, string>>

  constructor(
    statusCode: number,
    body: Record<string, unknown>,
    options: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(`${statusCode} ${JSON.stringify(body)}`, { cause: options.cause })
    this.name = 'HttpError'
    this.statusCode = statusCode
    this.body = body
    this.headers = options.headers ?? {}
  }
}
