import { performance } from 'node:perf_hooks'
import type { Dispatcher } from 'undici'
import type { TSchema } from '@sinclair/typebox'
import type { TypeCheck } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import type { Credential, Credentials } from '../credentials/credentials.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import { resourceOfPath } from './budget.ts'
import type { Upstream } from './endpoint.ts'
import { BudgetSpent, retryAfterSeconds, statusFailure, transportFailure, UpstreamFailure } from './errors.ts'
import { heldProjections, parsedBody, readHeldProjection, type HeldProjections } from './held-projections.ts'
import { upstreamInterceptors } from './interceptors.ts'
import type { UpstreamMetrics } from './metrics.ts'
import { projectionOf } from './projection.ts'
import type { RequestContext } from './request-context.ts'

/**
 * The one module that calls the upstream for the answers (docs/design.md, "Upstream calls"): each
 * GET with the credential `Credentials` gives it, checked against its budget, revalidated with
 * the held projection's ETag, retried and deduplicated by undici's interceptors.
 */

export interface ForgeClientOptions {
  /** Where the upstream is (`upstreamOf`). */
  upstream: Upstream
  /** Which credential each call goes with. */
  credentials: Credentials
  /** Deadline of one call, retries and body included. */
  timeoutMs: number
  /** Bytes of held projections kept in this process for revalidation with `If-None-Match`; 0 keeps none. */
  revalidationMaxBytes: number
  /** How long a held projection in `store` outlives its last use: a 200 that brought it or a 304 that reused it. */
  heldForMs: number
  /** Where lines about calls go when the caller brings no request of its own. */
  logger: FastifyBaseLogger
  /** Where replicas share the held projections; absent, each process holds its own. */
  store?: SharedStore | undefined
  /** The app's wall clock in ms (rate-limit resets are epoch seconds). */
  now: () => number
  /** Where every call is counted and timed. */
  metrics?: UpstreamMetrics | undefined
  /** The keep-alive dispatcher to build on (the forge plugin's). */
  dispatcher: Dispatcher
}

/** The one way this service speaks to the upstream about the answers. */
export interface ForgeClient {
  /**
   * GETs `path` (build it with `upstreamPath`) and resolves to its JSON body once it passes
   * `body`, projected on the fields `body` names (`projectionOf`), whether it came whole or from
   * what a 304 revalidated. Throws `UpstreamNotFound`, `UpstreamRateLimited` (`BudgetSpent` when
   * the budget refused the call) or `UpstreamFailure` (a body that fails its check included);
   * never anything else.
   */
  get<Schema extends TSchema>(path: string, body: TypeCheck<Schema>, query?: Record<string, string | number>, request?: RequestContext): Promise<Schema['static']>
}

/**
 * A `ForgeClient` on one keep-alive undici dispatcher composed of undici's own interceptors
 * (`upstreamInterceptors`). Each call asks `credentials` once which credential it goes with; a
 * credential the upstream refuses (401) is renewed once when it can be.
 *
 * Revalidation is one hand-written layer: the ETag of every upstream URL is held with the
 * projection of its last body, the fields the caller's check names (bounded; shared by the
 * replicas when a shared store is given), and every request for a held URL carries
 * `If-None-Match`; a 304 reuses the projection. undici's `cache` interceptor does
 * not fit, for two reasons found in its code: a 304 that carries `Cache-Control` (GitHub's
 * always do: `private, max-age=60`) deletes the stored entry instead of refreshing it, so the
 * next call goes out without `If-None-Match` and pays for a full 200; and the caller of a
 * revalidated answer gets the stored response's headers, not the 304's, so the 304's
 * `X-RateLimit-*` (the freshest word on the budget) would never reach us. When to ask again is
 * `FORGE_CACHE_TTL_SECONDS`'s decision, made by the response cache, not the upstream's `max-age`.
 */
export function createForgeClient(options: ForgeClientOptions): ForgeClient {
  const { upstream, credentials } = options
  const caller: Caller = {
    options,
    dispatcher: options.dispatcher.compose(upstreamInterceptors()),
    held: heldProjections(options.revalidationMaxBytes, options.store, options.heldForMs),
  }

  return {
    async get(path, check, query, request = { log: options.logger, revalidates: false }) {
      const target = query ? `${upstream.basePath}${path}?${new URLSearchParams(stringValues(query)).toString()}` : `${upstream.basePath}${path}`
      let credential = await credentials.credentialFor(request.account, request.log)
      for (;;) {
        try {
          return await callUpstream(caller, credential, target, check, request)
        } catch (error) {
          if (!(error instanceof UpstreamFailure && error.status === 401 && credential.renew)) throw error
          request.log.info({ upstream: { path: target } }, 'installation token refused; renewing it once')
          credential = await credential.renew()
        }
      }
    },
  }
}

/** What every call of one client goes through. */
interface Caller {
  options: ForgeClientOptions
  /** The dispatcher under the interceptors (`upstreamInterceptors`). */
  dispatcher: Dispatcher
  held: HeldProjections
}

/** One upstream call: `target` asked with `credential`, spending its budget, revalidated when a readable projection is held; its body once it passes `check`, projected. */
async function callUpstream<Schema extends TSchema>(caller: Caller, credential: Credential, target: string, check: TypeCheck<Schema>, request: RequestContext): Promise<Schema['static']> {
  const { options, held } = caller
  const { pinned } = options.upstream
  const headers = credential.token ? { ...pinned, authorization: `Bearer ${credential.token}` } : pinned
  // What other replicas learned of the budget counts before this call is made.
  const [heldEntry] = await Promise.all([held.get(target), credential.budget.refresh()])
  const reusable = heldEntry && readHeldProjection(heldEntry, check)
  const { response, text } = await send(caller, credential, target, reusable ? { ...headers, 'if-none-match': reusable.entry.etag } : headers, request)
  const { statusCode } = response
  if (statusCode === 304 && reusable) {
    // Held again: its life runs from this use, so that the next revalidation finds it too.
    held.hold(target, reusable.entry)
    return reusable.body
  }
  if (statusCode === 200) {
    const projection = projectionOf(check)
    const body = projection.project(checked(check, text))
    const etag = response.headers.etag
    if (typeof etag === 'string') held.hold(target, { etag, shape: projection.shape, text: JSON.stringify(body) })
    return body
  }
  throw statusFailure(statusCode, response.headers, text, options.now(), options.credentials.redact)
}

/**
 * One GET of `target` through the interceptors, within the deadline: its answer and body (none
 * for a 304), counted (by credential too), timed and logged. The credential's budget is the one
 * place a call is refused before it is made (`BudgetSpent`: GitHub asks integrations to stop
 * calling a spent resource), and it learns from every answer, a 304 included, with the wait a rate
 * limit's body tells. Concurrent identical GETs share one call below it, each told its answer.
 */
async function send(caller: Caller, credential: Credential, target: string, headers: Record<string, string>, request: RequestContext): Promise<{ response: Dispatcher.ResponseData; text: string }> {
  const { options, dispatcher } = caller
  const { upstream, metrics } = options
  const { budget } = credential
  const resource = resourceOfPath(target.slice(upstream.basePath.length))
  const resumesAt = budget.resumesAt(resource, request)
  if (resumesAt !== undefined) {
    // GitHub: keep calling after a rate limit and the integration may be banned.
    request.log.debug({ upstream: { path: target } }, 'upstream rate limit spent; call not made')
    metrics?.observeCredential(credential.kind, 'budget_spent')
    throw BudgetSpent.until(resumesAt, options.now())
  }
  const deadline = AbortSignal.timeout(options.timeoutMs)
  const started = performance.now()
  let response: Dispatcher.ResponseData
  let text = ''
  try {
    response = await dispatcher.request({ origin: upstream.origin, path: target, method: 'GET', headers, signal: deadline })
    const isRateLimit = response.statusCode === 403 || response.statusCode === 429
    if (!isRateLimit) budget.record(resource, response.headers)
    if (response.statusCode === 304) await response.body.dump()
    else text = await response.body.text()
    if (isRateLimit) budget.record(resource, response.headers, retryAfterSeconds(response.statusCode, response.headers, text, options.now()))
  } catch (error) {
    metrics?.observeCall(resource, 'error', (performance.now() - started) / 1000)
    throw transportFailure(error, deadline.aborted, options.timeoutMs, options.credentials.redact)
  }
  const ms = performance.now() - started
  metrics?.observeCall(resource, response.statusCode, ms / 1000)
  metrics?.observeCredential(credential.kind, 'sent')
  request.log.debug({ upstream: { path: target, statusCode: response.statusCode, ms: Math.round(ms) } }, 'upstream call')
  return { response, text }
}

function stringValues(query: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)]))
}

/** The body as JSON that passes `check`: anything else is the upstream's fault, and says where it failed. */
function checked<Schema extends TSchema>(check: TypeCheck<Schema>, text: string): Schema['static'] {
  const parsed = parsedBody(check, text)
  if ('body' in parsed) return parsed.body
  throw new UpstreamFailure(parsed.failure)
}
