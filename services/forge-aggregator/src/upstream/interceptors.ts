import { AsyncLocalStorage } from 'node:async_hooks'
import { interceptors, type Dispatcher } from 'undici'

/**
 * The undici interceptors under every upstream call (redirects, retries, deduplication), in the
 * order the client's dispatcher composes them.
 */

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

/**
 * The interceptors of the client's dispatcher, innermost first: `compose` wraps each around the
 * ones before it, so the last is outermost. Concurrent identical GETs are deduplicated first,
 * sharing one call and its retries. (The budget is applied above them all, by the client.)
 */
export function upstreamInterceptors(): Dispatcher.DispatcherComposeInterceptor[] {
  return [REDIRECT, IN_CALLERS_CONTEXT, RETRY, interceptors.deduplicate()]
}
