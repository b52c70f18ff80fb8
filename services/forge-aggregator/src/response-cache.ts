import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { LRUCache } from 'lru-cache'

/** A serialized answer, as it is sent and as it is kept. */
export interface CachedResponse {
  /** The JSON body, serialized once. */
  readonly body: string
  /** A strong validator of `body`. */
  readonly etag: string
  /** Statistics the answer could not fill; a partial answer is never kept. */
  readonly partial: readonly string[]
  /** Whether the answer shows a private repository: shared caches must not keep it. */
  readonly isPrivate: boolean
  /** When the answer stops being fresh, on the cache's clock (ms). */
  readonly expiresAt: number
}

/** What a route's production makes: the serialized answer and what it holds. */
export interface ProducedAnswer {
  body: string
  partial: readonly string[]
  isPrivate?: boolean
}

export interface ResponseCacheOptions {
  /** Freshness of a kept answer; 0 keeps nothing (concurrent requests are still coalesced). */
  ttlSeconds: number
  /** Bytes of answers kept, at most. */
  maxBytes: number
  /** A monotonic clock in ms; tests bring their own. */
  now?: () => number
}

/**
 * The assembled answers of the endpoints, fresh for `ttlSeconds`: within that time a repeated
 * request costs no upstream call. Concurrent requests for the same key while it is being
 * produced share that one production, so 200 simultaneous cold requests cost the upstream
 * calls of one. Errors and partial answers go to the requests that were waiting, and no further.
 */
export class ResponseCache {
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #fresh: LRUCache<string, CachedResponse> | undefined
  readonly #inFlight = new Map<string, Promise<CachedResponse>>()

  constructor(options: ResponseCacheOptions) {
    this.#ttlMs = options.ttlSeconds * 1000
    this.#now = options.now ?? (() => performance.now())
    this.#fresh =
      this.#ttlMs > 0
        ? new LRUCache({
            maxSize: options.maxBytes,
            sizeCalculation: (response) => response.body.length,
            ttl: this.#ttlMs,
            // Exact expiry on our clock, not one cached for a millisecond of real time.
            ttlResolution: 0,
            perf: { now: this.#now },
          })
        : undefined
  }

  /** The fresh answer for `key`, or the one `produce` makes (once, for every concurrent caller). */
  get(key: string, produce: () => Promise<ProducedAnswer>): Promise<CachedResponse> {
    const fresh = this.#fresh?.get(key)
    if (fresh) return Promise.resolve(fresh)

    let pending = this.#inFlight.get(key)
    if (!pending) {
      pending = this.#produce(key, produce).finally(() => this.#inFlight.delete(key))
      this.#inFlight.set(key, pending)
    }
    return pending
  }

  /** Seconds `response` stays fresh from now (what `Cache-Control: max-age` may promise). */
  secondsLeft(response: CachedResponse): number {
    return Math.max(0, Math.floor((response.expiresAt - this.#now()) / 1000))
  }

  async #produce(key: string, produce: () => Promise<ProducedAnswer>): Promise<CachedResponse> {
    const { body, partial, isPrivate = false } = await produce()
    const response: CachedResponse = { body, partial, isPrivate, etag: etagOf(body), expiresAt: this.#now() + this.#ttlMs }
    if (partial.length === 0) this.#fresh?.set(key, response)
    return response
  }
}

function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
}
