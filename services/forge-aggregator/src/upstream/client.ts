import { performance } from 'node:perf_hooks'
import { Agent, type Dispatcher } from 'undici'
import { LRUCache } from 'lru-cache'
import type { TSchema } from '@sinclair/typebox'
import type { TypeCheck } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import type { SharedStore } from '../shared-cache/store.ts'
import { storedEntries, type HeldBody } from '../shared-cache/stored.ts'
import { resourceOfPath, type RateLimitBudget } from './budget.ts'
import type { AppCredentials } from './credentials.ts'
import { BudgetSpent, UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from './errors.ts'
import { createInstallationTokens, type InstallationAccount } from './installation-token.ts'
import { upstreamInterceptors, type BudgetedDispatchOptions } from './interceptors.ts'
import type { UpstreamMetrics } from './metrics.ts'

/** The REST API version every request pins (spec: "pinned to 2022-11-28"). */
const API_VERSION = '2022-11-28'

export interface ForgeClientOptions {
  /** The REST API root: `https://api.github.com`, or a GitHub Enterprise `https://host/api/v3`. */
  baseUrl: string
  /** A personal token, sent as it is with every call. */
  token?: string | undefined
  /** A GitHub App installation: every call carries its installation token (docs/design.md, "GitHub App"). Excludes `token`. */
  app?: AppCredentials | undefined
  /** Deadline of one call, retries and body included. */
  timeoutMs: number
  userAgent: string
  /** Bytes of upstream bodies kept in this process for revalidation with `If-None-Match`; 0 keeps none. */
  revalidationMaxBytes: number
  /** Where lines about calls go when the caller brings no request logger of its own. */
  logger: FastifyBaseLogger
  /** The rate-limit budget every answer feeds and every call is checked against. */
  budget: RateLimitBudget
  /** Where replicas share the held bodies; absent, each process holds its own. */
  store?: SharedStore | undefined
  /** The app's wall clock in ms (rate-limit resets are epoch seconds). */
  now: () => number
  /** Where every call is counted and timed. */
  metrics?: UpstreamMetrics | undefined
  /** The dispatcher to build on; a keep-alive `Agent` unless a test brings its own. */
  dispatcher?: Dispatcher
}

/** Who a call is for: the request's logger (its lines carry the request id), and whether it only revalidates. */
export interface UpstreamCall {
  log: FastifyBaseLogger
  /** The call revalidates an answer that could still be sent stale: the budget may refuse it below its reserve. */
  revalidates?: boolean
}

/** The one way this service speaks to the upstream. */
export interface ForgeClient {
  /**
   * GETs `path` (build it with `upstreamPath`) and resolves to its JSON body once it passes
   * `body`. Throws `UpstreamNotFound`, `UpstreamRateLimited` (`BudgetSpent` when the budget
   * refused the call) or `UpstreamFailure` (a body that fails its check included); never anything else.
   */
  get<Schema extends TSchema>(path: string, body: TypeCheck<Schema>, query?: Record<string, string | number>, call?: UpstreamCall): Promise<Schema['static']>
  /** With a GitHub App: the installation's account (asked once with the App's JWT); undefined without an App or when it cannot be told. */
  installationAccount(): Promise<InstallationAccount | undefined>
  /** With a GitHub App: forgets the installation token, so the next call mints a new one (docs/webhooks.md); nothing otherwise. */
  forgetInstallationToken(): void
  /** Closes the upstream connections (of the Agent it made; a dispatcher given to it stays open). */
  close(): Promise<void>
}

/**
 * An upstream path in which every interpolated value is percent-encoded as exactly one path
 * segment, so that no input can change which resource is asked for.
 */
export function upstreamPath(strings: TemplateStringsArray, ...segments: string[]): string {
  return String.raw({ raw: strings }, ...segments.map(encodeSegment))
}

function encodeSegment(segment: string): string {
  if (segment === '' || segment === '.' || segment === '..') {
    throw new TypeError(`"${segment}" cannot be an upstream path segment`)
  }
  return encodeURIComponent(segment)
}

const MAX_BODY_BYTES = 32 * 1024 * 1024
/** GitHub: after a 429 or a secondary rate limit without `Retry-After`, "wait at least one minute". */
const DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
/** How long a replica-shared held body outlives its last use: a day of revalidations. */
const SHARED_HELD_TTL_MS = 24 * 60 * 60 * 1000
/** How much of an upstream's error message a failure repeats. */
const MAX_UPSTREAM_MESSAGE_LENGTH = 200

/**
 * A `ForgeClient` on one keep-alive undici dispatcher composed of undici's own interceptors and
 * the budget's (`upstreamInterceptors`).
 *
 * Revalidation is one hand-written layer: the last body and ETag of every upstream URL are
 * held (bounded; shared by the replicas when a shared store is given), and every request for a
 * held URL carries `If-None-Match`; a 304 reuses the held body. undici's `cache` interceptor does
 * not fit, for two reasons found in its code: a 304 that carries `Cache-Control` (GitHub's
 * always do: `private, max-age=60`) deletes the stored entry instead of refreshing it, so the
 * next call goes out without `If-None-Match` and pays for a full 200; and the caller of a
 * revalidated answer gets the stored response's headers, not the 304's, so the 304's
 * `X-RateLimit-*` (the freshest word on the budget) would never reach us. When to ask again is
 * `FORGE_CACHE_TTL_SECONDS`'s decision, made by the response cache, not the upstream's `max-age`.
 */
export function createForgeClient(options: ForgeClientOptions): ForgeClient {
  const { token, timeoutMs, store, metrics, budget, now } = options
  const base = new URL(options.baseUrl)
  const origin = base.origin
  const basePath = base.pathname.replace(/\/+$/, '')
  const agent = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, maxResponseSize: MAX_BODY_BYTES })
  const retryAfter = (statusCode: number, headers: Dispatcher.ResponseData['headers'], text: string) => retryAfterSeconds(statusCode, headers, text, now())
  const dispatcher = agent.compose(upstreamInterceptors(budget, now, retryAfter))
  const held =
    options.revalidationMaxBytes > 0
      ? new LRUCache<string, HeldBody>({ maxSize: options.revalidationMaxBytes, sizeCalculation: (entry) => entry.text.length + entry.etag.length })
      : undefined
  const pinned: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': API_VERSION,
    'user-agent': options.userAgent,
  }
  // The App's own calls (its JWT) go straight to the upstream: they spend the App's limit, not the installation's.
  const tokens = options.app
    ? createInstallationTokens({
        app: options.app,
        now,
        logger: options.logger,
        send: async ({ method, path, authorization }) => {
          const response = await agent.request({
            origin,
            path: `${basePath}${path}`,
            method,
            headers: { ...pinned, authorization },
            signal: AbortSignal.timeout(timeoutMs),
          })
          return { statusCode: response.statusCode, text: await response.body.text() }
        },
      })
    : undefined

  /** What we may say about a failure: never a credential, even if the upstream echoed it. */
  const safe = (message: string) => [token ?? '', ...(tokens?.secrets() ?? [])].reduce((said, secret) => (secret ? said.replaceAll(secret, '[redacted]') : said), message)

  /** The body held for `target`: the replicas' shared one, else this process's own. */
  async function heldFor(held: LRUCache<string, HeldBody>, target: string): Promise<HeldBody | undefined> {
    return (await store?.get(storedEntries.held, `held:${target}`)) ?? held.get(target)
  }

  function hold(target: string, body: HeldBody): void {
    held?.set(target, body)
    void store?.set(`held:${target}`, JSON.stringify(body), SHARED_HELD_TTL_MS)
  }

  async function get<Schema extends TSchema>(
    path: string,
    check: TypeCheck<Schema>,
    query?: Record<string, string | number>,
    call: UpstreamCall = { log: options.logger },
  ): Promise<Schema['static']> {
    const target = query ? `${basePath}${path}?${new URLSearchParams(stringValues(query)).toString()}` : `${basePath}${path}`
    if (!tokens) return attempt(target, check, call, token)
    let installationToken = await tokens.current()
    try {
      return await attempt(target, check, call, installationToken)
    } catch (error) {
      if (!(error instanceof UpstreamFailure && error.status === 401)) throw error
      // Revoked, or expired early: one new token, one more try (a second 401 is the answer).
      call.log.info({ upstream: { path: target } }, 'installation token refused; renewing it once')
      tokens.refused(installationToken)
      installationToken = await tokens.current()
      return attempt(target, check, call, installationToken)
    }
  }

  async function attempt<Schema extends TSchema>(target: string, check: TypeCheck<Schema>, call: UpstreamCall, bearer: string | undefined): Promise<Schema['static']> {
    const { log } = call
    const headers = bearer ? { ...pinned, authorization: `Bearer ${bearer}` } : pinned
    const resource = resourceOfPath(target.slice(basePath.length))
    // What other replicas learned of the budget counts before this call is made.
    const [heldBody] = await Promise.all([held ? heldFor(held, target) : undefined, budget.refresh()])
    const deadline = AbortSignal.timeout(timeoutMs)
    const started = performance.now()

    let response: Dispatcher.ResponseData
    let text = ''
    try {
      const request: BudgetedDispatchOptions & Dispatcher.RequestOptions = {
        origin,
        path: target,
        method: 'GET',
        headers: heldBody ? { ...headers, 'if-none-match': heldBody.etag } : headers,
        signal: deadline,
        budgetedCall: { resource, revalidates: call.revalidates ?? false },
      }
      response = await dispatcher.request(request)
      if (response.statusCode === 304) await response.body.dump()
      else text = await response.body.text()
    } catch (error) {
      if (error instanceof BudgetSpent) {
        // GitHub: keep calling after a rate limit and the integration may be banned.
        log.debug({ upstream: { path: target } }, 'upstream rate limit spent; call not made')
        throw error
      }
      metrics?.observeCall(resource, 'error', (performance.now() - started) / 1000)
      throw transportFailure(error, deadline.aborted)
    }

    const { statusCode } = response
    const ms = performance.now() - started
    metrics?.observeCall(resource, statusCode, ms / 1000)
    log.debug({ upstream: { path: target, statusCode, ms: Math.round(ms) } }, 'upstream call')

    if (statusCode === 304 && heldBody) return checked(check, heldBody.text)
    if (statusCode === 200) {
      const body = checked(check, text)
      const etag = response.headers.etag
      if (typeof etag === 'string') hold(target, { etag, text })
      return body
    }
    throw statusFailure(statusCode, response.headers, text)
  }

  function transportFailure(error: unknown, timedOut: boolean): UpstreamFailure {
    // A programming error of ours is not the upstream's failure: it goes on as it is (a 500 of ours).
    if (isProgrammingError(error)) throw error
    if (timedOut) return new UpstreamFailure(`Upstream did not answer within ${timeoutMs} ms`)
    const { code, message } = error as Error & { code?: string }
    return new UpstreamFailure(safe(`Upstream request failed: ${code ?? message}`))
  }

  function statusFailure(statusCode: number, responseHeaders: Dispatcher.ResponseData['headers'], text: string) {
    const said = upstreamMessage(text)
    // Redacted before it is shortened: a credential the cut went through would no longer match.
    const reason = said === undefined ? `status ${statusCode}` : safe(said).slice(0, MAX_UPSTREAM_MESSAGE_LENGTH)
    const message = `Upstream responded ${statusCode}: ${reason}`
    if (statusCode === 404) return new UpstreamNotFound(message, statusCode)
    if (statusCode === 403 || statusCode === 429) {
      const seconds = retryAfter(statusCode, responseHeaders, text)
      return new UpstreamRateLimited(message, seconds, statusCode, seconds === undefined ? undefined : now() + seconds * 1000)
    }
    return new UpstreamFailure(message, statusCode)
  }

  return {
    get,
    installationAccount: async () => tokens?.account(),
    forgetInstallationToken: () => tokens?.forget(),
    async close() {
      // A dispatcher the caller brought is the caller's to close.
      if (!options.dispatcher) await agent.close()
    },
  }
}

function isProgrammingError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof ReferenceError || error instanceof RangeError || error instanceof SyntaxError
}

function stringValues(query: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)]))
}

/** The body as JSON that passes `check`: anything else is the upstream's fault, and says where it failed. */
function checked<Schema extends TSchema>(check: TypeCheck<Schema>, text: string): Schema['static'] {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new UpstreamFailure('Upstream sent a body that is not valid JSON')
  }
  if (check.Check(body)) return body
  // A body that fails its check has at least one error.
  const { path, message } = check.Errors(body).First()!
  throw new UpstreamFailure(`Upstream sent an unexpected body (${path || '/'}: ${message})`)
}

/** The `message` of an upstream error body (`{"message": …}`); undefined if none. */
function upstreamMessage(text: string): string | undefined {
  try {
    const { message } = JSON.parse(text) as { message?: unknown }
    return typeof message === 'string' ? message : undefined
  } catch {
    return undefined
  }
}

/**
 * Seconds to wait before asking again (docs/design.md, "Errors"). `Retry-After` is authoritative when present.
 * Only a spent primary limit (`X-RateLimit-Remaining: 0`) makes `X-RateLimit-Reset` the answer:
 * a plain "forbidden" also carries a reset, and must not tell clients to wait an hour. A 429 or a
 * secondary rate limit without either waits GitHub's minute; anything else gets no advice.
 */
function retryAfterSeconds(statusCode: number, headers: Dispatcher.ResponseData['headers'], text: string, nowMs: number): number | undefined {
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

/** GitHub's secondary rate limits answer 403 with a message saying so. */
function isSecondaryRateLimit(text: string): boolean {
  return /secondary rate limit/i.test(upstreamMessage(text) ?? '')
}
