import { AsyncLocalStorage } from 'node:async_hooks'
import { interceptors, type Dispatcher } from 'undici'
import type { BudgetedCall, Headers, RateLimitBudget } from './budget.ts'
import { BudgetSpent } from './errors.ts'

// Retries only what a retry can fix, within the call's deadline: undici's default (5 tries,
// up to 30 s apart, 429 included) would outlive a 10 s deadline and retry rate limits.
const RETRY = interceptors.retry({
  methods: ['GET'],
  statusCodes: [502, 503, 504],
  errorCodes: ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'],
  maxRetries: 2,
  minTimeout: 100,
  timeoutFactor: 2,
  maxTimeout: 1_000,
  retryAfter: false,
  // The last attempt's answer reaches us as an answer (a 503), not as a retry error.
  throwOnError: false,
})
/**
 * Answers reach an interceptor in the async context of the connection they came on, which is
 * the context of the call that opened it: a retry scheduled there would be traced (and its
 * `traceparent` sent) in that earlier request's trace. Placed under the retry interceptor, this
 * runs its decisions in the context of the call being retried. A snapshot costs next to nothing
 * when nothing (no tracing) keeps a context.
 */
const IN_CALLERS_CONTEXT: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
  const inCallersContext = AsyncLocalStorage.snapshot()
  return dispatch(opts, {
    onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
    onResponseStart: (controller, statusCode, headers, statusMessage) =>
      inCallersContext(() => handler.onResponseStart?.(controller, statusCode, headers, statusMessage)),
    onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
    onResponseEnd: (controller, trailers) => inCallersContext(() => handler.onResponseEnd?.(controller, trailers)),
    onResponseError: (controller, error) => inCallersContext(() => handler.onResponseError?.(controller, error)),
  })
}
// Renamed users and repositories answer 301/307 to their new name: at most 3 are followed
// (docs/design.md, "Upstream calls").
const REDIRECT = interceptors.redirect({ maxRedirections: 3 })

/** The dispatch option through which `ForgeClient` tells the budget what a call spends. */
export interface BudgetedDispatchOptions extends Dispatcher.DispatchOptions {
  budgetedCall: BudgetedCall
}

/**
 * The one place the budget is applied, as the outermost interceptor: a call the budget forbids
 * fails with `BudgetSpent` before anything is sent, and every answer that comes back, a 304
 * included, is recorded (with its wait when it is a rate limit).
 */
function budgetInterceptor(
  budget: RateLimitBudget,
  now: () => number,
  retryAfterSeconds: (statusCode: number, headers: Headers, text: string) => number | undefined,
): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (opts, handler) => {
    // Every call reaches it from `ForgeClient.get`, which always says what it spends.
    const call = (opts as BudgetedDispatchOptions).budgetedCall
    const resumesAt = budget.resumesAt(call)
    if (resumesAt !== undefined) throw BudgetSpent.until(resumesAt, now())

    let statusCode = 0
    let headers: Headers = {}
    let text = ''
    const isRateLimit = () => statusCode === 403 || statusCode === 429
    return dispatch(opts, {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
      onResponseStart(controller, status, responseHeaders, statusMessage) {
        statusCode = status
        headers = responseHeaders
        if (!isRateLimit()) budget.record(call.resource, headers)
        return handler.onResponseStart?.(controller, status, responseHeaders, statusMessage)
      },
      onResponseData(controller, chunk) {
        if (isRateLimit() && text.length < 4096) text += chunk.toString()
        return handler.onResponseData?.(controller, chunk)
      },
      onResponseEnd(controller, trailers) {
        if (isRateLimit()) budget.record(call.resource, headers, retryAfterSeconds(statusCode, headers, text))
        return handler.onResponseEnd?.(controller, trailers)
      },
    })
  }
}

/**
 * The interceptors of the client's dispatcher, innermost first: `compose` wraps each around the
 * ones before it, so the last is outermost. The budget first decides whether a call may be made
 * at all and sees every answer; then concurrent identical GETs are deduplicated, sharing one call
 * and its retries.
 * `retryAfterSeconds` reads a rate-limit answer's headers and body.
 */
export function upstreamInterceptors(
  budget: RateLimitBudget,
  now: () => number,
  retryAfterSeconds: (statusCode: number, headers: Headers, text: string) => number | undefined,
): Dispatcher.DispatcherComposeInterceptor[] {
  return [REDIRECT, IN_CALLERS_CONTEXT, RETRY, interceptors.deduplicate(), budgetInterceptor(budget, now, retryAfterSeconds)]
}
