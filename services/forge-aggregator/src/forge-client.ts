import { performance } from 'node:perf_hooks'
import { Agent, interceptors, type Dispatcher } from 'undici'
import { LRUCache } from 'lru-cache'
import type { FastifyBaseLogger } from 'fastify'
import { RateLimitBudget, resourceOfPath } from './rate-limit-budget.ts'
import type { UpstreamMetrics } from './metrics.ts'
import type { SharedStore } from './shared-store.ts'
import { BudgetSpent, UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from './upstream-errors.ts'

/** The REST API version every request pins (spec: "pinned to 2022-11-28"). */
const API_VERSION = '2022-11-28'

export interface ForgeClientOptions {
  /** The REST API root: `https://api.github.com`, or a GitHub Enterprise `https://host/api/v3`. */
  baseUrl: string
  token?: string | undefined
  /** Deadline of one call, retries and body included. */
  timeoutMs: number
  userAgent: string
  /** Bytes of upstream bodies kept in this process for revalidation with `If-None-Match`; 0 keeps none. */
  revalidationMaxBytes: number
  /** Where lines about calls go when the caller brings no request logger of its own. */
  logger: FastifyBaseLogger
  /** The rate-limit budget every answer feeds and every call consults; one of its own unless given. */
  budget?: RateLimitBudget
  /** Where replicas share the held bodies; absent, each process holds its own. */
  shared?: SharedStore | undefined
  /** The wall clock in ms (rate-limit resets are epoch seconds); tests bring their own. */
  now?: () => number
  /** Where every call is counted and timed. */
  metrics?: UpstreamMetrics | undefined
  /** The dispatcher to build on; a keep-alive `Agent` unless a test brings its own. */
  dispatcher?: Dispatcher
}

/** The one way this service speaks to the upstream. */
export interface ForgeClient {
  /**
   * GETs `path` (build it with `upstreamPath`) and resolves to its JSON body. Throws
   * `UpstreamNotFound`, `UpstreamRateLimited` or `UpstreamFailure`; never anything else.
   */
  get<Body>(path: string, query?: Record<string, string | number>, log?: FastifyBaseLogger): Promise<Body>
  /** What the upstream said of its rate limits, shared with the response cache. */
  readonly budget: RateLimitBudget
  /** Closes the upstream connections. */
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
// Renamed users and repositories answer 301/307 to their new name (DESIGN §4: at most 3).
const REDIRECT = interceptors.redirect({ maxRedirections: 3 })
const MAX_BODY_BYTES = 32 * 1024 * 1024
/** GitHub: after a 429 or a secondary rate limit without `Retry-After`, "wait at least one minute". */
const DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60
/** How long a replica-shared held body outlives its last use: a day of revalidations. */
const SHARED_HELD_TTL_MS = 24 * 60 * 60 * 1000

/**
 * The last body of an upstream URL and its ETag. The text is kept, not the parsed object: it
 * occupies what its length says (V8 keeps ASCII one byte a character) where the object would
 * take several times that, so the bound on held bytes is a real one. A 304 parses it again.
 */
interface HeldBody {
  etag: string
  text: string
}

/**
 * A `ForgeClient` on one keep-alive undici dispatcher composed of undici's own interceptors.
 * `compose` wraps each interceptor around the ones before it, so the last is outermost:
 * concurrent identical GETs are deduplicated first, sharing one call and its retries.
 *
 * Revalidation is one hand-written layer: the last body and ETag of every upstream URL are
 * held (bounded; shared by the replicas when a shared store is given), and every request for a
 * held URL carries `If-None-Match`; a 304 reuses the held body. undici's `cache` interceptor does
 * not fit: it decides freshness from the upstream's `Cache-Control: max-age=60`, while here
 * `FORGE_CACHE_TTL_SECONDS` decides when to ask again, and when we ask we always want the
 * upstream's word (a cheap 304), never a stored guess. The rate-limit budget is the other: every
 * answer feeds it, and a call to a spent resource is refused before it is made (`BudgetSpent`).
 */
export function createForgeClient(options: ForgeClientOptions): ForgeClient {
  const { token, timeoutMs, shared, metrics } = options
  const now = options.now ?? Date.now
  const budget = options.budget ?? new RateLimitBudget({ reserve: 0, now })
  const base = new URL(options.baseUrl)
  const origin = base.origin
  const basePath = base.pathname.replace(/\/+$/, '')
  const agent = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, maxResponseSize: MAX_BODY_BYTES })
  const dispatcher = agent.compose(REDIRECT, RETRY, interceptors.deduplicate())
  const held =
    options.revalidationMaxBytes > 0
      ? new LRUCache<string, HeldBody>({ maxSize: options.revalidationMaxBytes, sizeCalculation: (entry) => entry.text.length + entry.etag.length })
      : undefined
  const headers: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': API_VERSION,
    'user-agent': options.userAgent,
    ...(token ? { authorization: `Bearer ${token}` } : {}),
  }

  /** What we may say about a failure: never the token, even if the upstream echoed it. */
  const safe = (message: string) => (token ? message.replaceAll(token, '[redacted]') : message)

  /** The body held for `target`: the replicas' shared one, else this process's own. */
  async function heldFor(held: LRUCache<string, HeldBody>, target: string): Promise<HeldBody | undefined> {
    const value = await shared?.get(`held:${target}`)
    return value === undefined ? held.get(target) : (JSON.parse(value) as HeldBody)
  }

  function hold(target: string, body: HeldBody): void {
    held?.set(target, body)
    void shared?.set(`held:${target}`, JSON.stringify(body), SHARED_HELD_TTL_MS)
  }

  async function get<Body>(path: string, query?: Record<string, string | number>, log = options.logger): Promise<Body> {
    const target = query ? `${basePath}${path}?${new URLSearchParams(stringValues(query)).toString()}` : `${basePath}${path}`
    // GitHub: keep calling after a rate limit and the integration may be banned.
    const resource = resourceOfPath(path)
    const resumesAt = budget.blockedUntil(resource)
    if (resumesAt !== undefined) {
      log.debug({ upstream: { path: target } }, 'upstream rate limit spent; call not made')
      throw BudgetSpent.until(resumesAt, now())
    }
    const heldBody = held ? await heldFor(held, target) : undefined
    const deadline = AbortSignal.timeout(timeoutMs)
    const started = performance.now()

    let response: Dispatcher.ResponseData
    let text = ''
    try {
      response = await dispatcher.request({
        origin,
        path: target,
        method: 'GET',
        headers: heldBody ? { ...headers, 'if-none-match': heldBody.etag } : headers,
        signal: deadline,
      })
      if (response.statusCode === 304) await response.body.dump()
      else text = await response.body.text()
    } catch (error) {
      metrics?.observeCall(resource, 'error', (performance.now() - started) / 1000)
      throw transportFailure(error, deadline.aborted)
    }

    const { statusCode } = response
    const ms = performance.now() - started
    metrics?.observeCall(resource, statusCode, ms / 1000)
    log.debug({ upstream: { path: target, statusCode, ms: Math.round(ms) } }, 'upstream call')

    if (statusCode === 304 && heldBody) {
      budget.record(path, response.headers)
      return parseJson(heldBody.text) as Body
    }
    if (statusCode === 200) {
      budget.record(path, response.headers)
      const body = parseJson(text)
      const etag = response.headers.etag
      if (typeof etag === 'string') hold(target, { etag, text })
      return body as Body
    }
    const failure = statusFailure(statusCode, response.headers, text)
    budget.record(path, response.headers, failure instanceof UpstreamRateLimited ? failure.retryAfterSeconds : undefined)
    throw failure
  }

  function transportFailure(error: unknown, timedOut: boolean): UpstreamFailure {
    if (timedOut) return new UpstreamFailure(`Upstream did not answer within ${timeoutMs} ms`)
    const { code, message } = error as Error & { code?: string }
    return new UpstreamFailure(safe(`Upstream request failed: ${code ?? message}`))
  }

  function statusFailure(statusCode: number, responseHeaders: Dispatcher.ResponseData['headers'], text: string) {
    const reason = safe(upstreamMessage(text) ?? `status ${statusCode}`)
    const message = `Upstream responded ${statusCode}: ${reason}`
    if (statusCode === 404) return new UpstreamNotFound(message, statusCode)
    if (statusCode === 403 || statusCode === 429) {
      return new UpstreamRateLimited(message, retryAfterSeconds(statusCode, responseHeaders, text, now()), statusCode)
    }
    return new UpstreamFailure(message, statusCode)
  }

  return {
    get,
    budget,
    async close() {
      await agent.close()
    },
  }
}

function stringValues(query: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)]))
}

/** The body as JSON: an object or an array, as every endpoint we call answers. */
function parseJson(text: string): unknown {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new UpstreamFailure('Upstream sent a body that is not valid JSON')
  }
  if (typeof body !== 'object' || body === null) throw new UpstreamFailure('Upstream sent an unexpected body')
  return body
}

/** The `message` of an upstream error body (`{"message": …}`), shortened; undefined if none. */
function upstreamMessage(text: string): string | undefined {
  try {
    const { message } = JSON.parse(text) as { message?: unknown }
    return typeof message === 'string' ? message.slice(0, 200) : undefined
  } catch {
    return undefined
  }
}

/**
 * Seconds to wait before asking again (DESIGN §4). `Retry-After` is authoritative when present.
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
