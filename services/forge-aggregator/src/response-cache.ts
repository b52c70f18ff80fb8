import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import { describeError } from '@repo/http-errors'
import type { RateLimitBudget } from './rate-limit-budget.ts'
import type { SharedStore } from './shared-store.ts'
import { BudgetSpent, UpstreamError, UpstreamNotFound } from './upstream-errors.ts'

/** A serialized answer, as it is sent and as it is kept (in this process and in the shared store). */
export interface CachedResponse {
  /** The JSON body, serialized once. */
  readonly body: string
  /** A strong validator of `body`. */
  readonly etag: string
  /** Statistics the answer could not fill. */
  readonly partial: readonly string[]
  /** Whether the answer shows a private repository: no shared cache downstream may keep it. */
  readonly isPrivate: boolean
  /** When it was produced, on the wall clock (ms): replicas compare it. */
  readonly producedAt: number
  /** When it stops being fresh. */
  readonly freshUntil: number
  /** When it may no longer be served even stale. */
  readonly keepUntil: number
}

/** What a route's production makes: the serialized answer and what it holds. */
export interface ProducedAnswer {
  body: string
  partial: readonly string[]
  isPrivate?: boolean
}

/** How an answer was obtained, as `forge_cache_results_total` counts it. */
export type CacheResult = 'hit' | 'miss' | 'collapsed' | 'revalidated' | 'stale'

/** An answer and how it was obtained: what `Cache-Status` (RFC 9211) says about it. */
export interface CacheAnswer {
  response: CachedResponse
  result: CacheResult
  /** Whether this request's production was kept for the requests after it. */
  stored: boolean
  /** Why a stale answer was sent: the upstream failed, or the budget forbade asking. */
  staleBecause?: 'stale-if-error' | 'budget'
  /** The upstream status that failed, when the failure had one. */
  failedStatus?: number | undefined
}

/** The endpoints whose answers are counted apart. */
export type Endpoint = 'users' | 'repos'

export interface ResponseCacheOptions {
  /** Freshness of a kept answer (`FORGE_CACHE_TTL_SECONDS`); 0 never answers from the cache fresh. */
  ttlSeconds: number
  /** How long past its freshness an answer may be sent when asking again fails (`FORGE_STALE_SECONDS`). */
  staleSeconds: number
  /** Bytes of answers kept in this process, at most. */
  maxBytes: number
  /** The wall clock in ms: replicas compare production times. Tests bring their own. */
  now: () => number
  budget: RateLimitBudget
  /** Where replicas share answers and production locks; absent, everything stays in this process. */
  shared?: SharedStore | undefined
  /** How long a request waits for another replica's production before producing itself (`FORGE_TIMEOUT_MS`). */
  waitMs: number
  /** Told how every request was answered, for `forge_cache_results_total`. */
  onResult?: (endpoint: Endpoint, result: CacheResult) => void
}

/** A request's part in `get`: which endpoint asks, and the logger that carries its request id. */
export interface CacheRequest {
  endpoint: Endpoint
  log: FastifyBaseLogger
}

/**
 * The assembled answers of the endpoints (DESIGN §4, §7). Within the TTL a repeated request
 * costs no upstream call, and is answered from this process's memory even when answers are
 * shared: every replica keeps an answer until the same `freshUntil`, so no two replicas hold
 * different fresh answers for long. Past the TTL the answer is produced again, once for every
 * concurrent request of this process and, with a shared store, of every replica (a lock with an
 * expiry; the others wait for its result, at most `waitMs`). When producing fails for any reason
 * but an upstream 404, or the rate-limit budget forbids asking, the last answer is sent stale
 * for up to `staleSeconds` more. Errors go to the requests that were waiting, and no further.
 */
export class ResponseCache {
  readonly #options: ResponseCacheOptions
  readonly #ttlMs: number
  readonly #staleMs: number
  readonly #local: LRUCache<string, CachedResponse>
  readonly #inFlight = new Map<string, Promise<CacheAnswer>>()

  constructor(options: ResponseCacheOptions) {
    this.#options = options
    this.#ttlMs = options.ttlSeconds * 1000
    this.#staleMs = options.staleSeconds * 1000
    this.#local = new LRUCache({
      maxSize: options.maxBytes,
      sizeCalculation: (response) => response.body.length,
      // Entries carry their own expiry on our clock; the cache only has to forget them.
      ttlAutopurge: false,
      ttlResolution: 0,
      perf: { now: options.now },
    })
  }

  /**
   * The answer for `key`: fresh from memory, or the one `produce` makes (once for every
   * concurrent caller), or a stale one when producing fails. Rejects with what `produce`
   * rejected with (or `BudgetSpent`) when there is nothing to fall back on.
   */
  get(key: string, produce: () => Promise<ProducedAnswer>, request: CacheRequest): Promise<CacheAnswer> {
    const kept = this.#local.get(key)
    const hit = this.#hitOf(kept, request.endpoint)
    if (hit) return Promise.resolve(hit)

    const pending = this.#inFlight.get(key)
    if (pending) return pending.then((answer) => this.#counted(request, asCollapsed(answer)))

    const production = this.#resolve(key, kept, produce, request).finally(() => this.#inFlight.delete(key))
    this.#inFlight.set(key, production)
    return production.then((answer) => this.#counted(request, answer))
  }

  /**
   * The fresh answer for `key` from this process's memory, counted as a hit, or undefined.
   * Synchronous: the most frequent answer costs no promise.
   */
  fresh(key: string, endpoint: Endpoint): CacheAnswer | undefined {
    return this.#hitOf(this.#local.get(key), endpoint)
  }

  /** Seconds `response` stays fresh from now (what `Cache-Control: max-age` may promise). */
  secondsLeft(response: CachedResponse): number {
    return Math.max(0, Math.floor((response.freshUntil - this.#options.now()) / 1000))
  }

  /** Seconds since `response` was produced (its `Age`). */
  ageOf(response: CachedResponse): number {
    return Math.max(0, Math.floor((this.#options.now() - response.producedAt) / 1000))
  }

  /** `kept` as a hit, counted, when it is still fresh. */
  #hitOf(kept: CachedResponse | undefined, endpoint: Endpoint): CacheAnswer | undefined {
    if (!kept || !this.#isFresh(kept)) return undefined
    this.#options.onResult?.(endpoint, 'hit')
    return { response: kept, result: 'hit', stored: false }
  }

  #isFresh(response: CachedResponse): boolean {
    return this.#ttlMs > 0 && this.#options.now() <= response.freshUntil
  }

  #counted(request: CacheRequest, answer: CacheAnswer): CacheAnswer {
    this.#options.onResult?.(request.endpoint, answer.result)
    return answer
  }

  async #resolve(key: string, kept: CachedResponse | undefined, produce: () => Promise<ProducedAnswer>, request: CacheRequest) {
    const { budget, shared } = this.#options
    let last = kept
    if (shared) {
      const [theirs] = await Promise.all([this.#sharedAnswer(key), budget.refresh()])
      last = this.#newest(key, last, theirs)
      if (last && this.#isFresh(last)) return { response: last, result: 'hit', stored: false } satisfies CacheAnswer
    }

    // Below the reserve, known users are answered stale rather than spend what is left on them;
    // a spent budget is not asked at all, not even for the searches of a request that cannot succeed.
    const coreBlockedUntil = budget.blockedUntil('core')
    if (last && (coreBlockedUntil !== undefined || budget.isBelowReserve())) {
      return { response: last, result: 'stale', stored: false, staleBecause: 'budget' } satisfies CacheAnswer
    }
    if (coreBlockedUntil !== undefined) throw BudgetSpent.until(coreBlockedUntil, this.#options.now())

    if (!shared) return this.#produce(key, last, produce, request)

    const release = shared.waitForRelease(key, this.#options.waitMs)
    const lock = await shared.lock(key, 2 * this.#options.waitMs)
    if (lock === false) {
      await release.done
      const theirs = await this.#sharedAnswer(key)
      if (theirs && this.#isFresh(theirs)) {
        this.#keep(key, theirs)
        return { response: theirs, result: 'collapsed', stored: false } satisfies CacheAnswer
      }
      // Their production failed, or its holder died: produce it here.
    } else {
      release.cancel()
    }
    try {
      return await this.#produce(key, last, produce, request)
    } finally {
      if (typeof lock === 'string') shared.release(key, lock)
    }
  }

  async #produce(key: string, last: CachedResponse | undefined, produce: () => Promise<ProducedAnswer>, request: CacheRequest) {
    let produced: ProducedAnswer
    try {
      produced = await produce()
    } catch (error) {
      return this.#orStale(key, last, error, request)
    }

    const now = this.#options.now()
    const { body, partial, isPrivate = false } = produced
    // A partial answer is kept only while the search budget is spent, and no longer than the
    // TTL: a search that failed for another reason is asked again by the next request.
    const searchResumesAt = partial.length > 0 ? this.#options.budget.blockedUntil('search') : undefined
    const freshUntil = Math.min(now + this.#ttlMs, searchResumesAt ?? Number.POSITIVE_INFINITY)
    const keepUntil = partial.length > 0 ? freshUntil : freshUntil + this.#staleMs
    const response: CachedResponse = { body, partial, isPrivate, etag: etagOf(body), producedAt: now, freshUntil, keepUntil }
    const stored = keepUntil > now && (partial.length === 0 || searchResumesAt !== undefined)
    if (stored) await this.#store(key, response)
    return { response, result: last ? 'revalidated' : 'miss', stored } satisfies CacheAnswer
  }

  #orStale(key: string, last: CachedResponse | undefined, error: unknown, request: CacheRequest): CacheAnswer {
    // A user or repository that no longer exists is answered so, not with what it used to be.
    if (error instanceof UpstreamNotFound) {
      this.#local.delete(key)
      this.#options.shared?.delete(`answer:${key}`)
      throw error
    }
    if (!last || !(error instanceof UpstreamError)) throw error
    const staleBecause = error instanceof BudgetSpent ? 'budget' : 'stale-if-error'
    request.log.warn({ error: describeError(error), ageSeconds: this.ageOf(last) }, `answering stale (${staleBecause})`)
    return { response: last, result: 'stale', stored: false, staleBecause, failedStatus: error.status }
  }

  /** The later of two productions of `key`, kept here when it is theirs. */
  #newest(key: string, ours: CachedResponse | undefined, theirs: CachedResponse | undefined): CachedResponse | undefined {
    if (!theirs || (ours && ours.producedAt >= theirs.producedAt)) return ours
    this.#keep(key, theirs)
    return theirs
  }

  async #sharedAnswer(key: string): Promise<CachedResponse | undefined> {
    const value = await this.#options.shared?.get(`answer:${key}`)
    if (value === undefined) return undefined
    const response = JSON.parse(value) as CachedResponse
    return response.keepUntil > this.#options.now() ? response : undefined
  }

  /**
   * Keeps `response` here and in the shared store, and resolves once the store has it: a request
   * that follows this answer, on any replica, then finds it.
   */
  async #store(key: string, response: CachedResponse): Promise<void> {
    this.#keep(key, response)
    await this.#options.shared?.set(`answer:${key}`, JSON.stringify(response), response.keepUntil - this.#options.now())
  }

  #keep(key: string, response: CachedResponse): void {
    const ttl = response.keepUntil - this.#options.now()
    if (ttl > 0) this.#local.set(key, response, { ttl })
  }
}

/** What a request that waited on another's production got: the same answer, counted as collapsed. */
function asCollapsed(answer: CacheAnswer): CacheAnswer {
  return answer.result === 'miss' || answer.result === 'revalidated' ? { ...answer, result: 'collapsed', stored: false } : answer
}

function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
}
