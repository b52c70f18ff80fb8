import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { ProductionLock } from '../shared-cache/lock.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import { storedEntries, type CachedAnswer } from '../shared-cache/stored.ts'
import type { Produced } from '../forge/service.ts'
import { BudgetSpent, UpstreamError, UpstreamNotFound } from '../upstream/errors.ts'
import type { RequestContext } from '../upstream/request-context.ts'

export type { CachedAnswer } from '../shared-cache/stored.ts'

/**
 * The response cache: the answers of the endpoints, kept in memory and shared by the replicas,
 * produced once for every concurrent request, and sent stale when producing fails.
 */

/** How an answer was obtained, as `forge_cache_results_total` counts it. */
export type CacheResult = 'hit' | 'miss' | 'collapsed' | 'revalidated' | 'stale'

/** A cached answer as it is sent to one request, and how it was obtained: what `Cache-Status` (RFC 9211) says about it. */
export interface ServedAnswer {
  answer: CachedAnswer
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

/** Makes the answer, serialized, for the request `context` (which revalidates when an answer is held that could still be sent stale). */
export type Produce = (context: RequestContext) => Promise<Produced<string>>

export interface ResponseCacheOptions {
  /** Freshness of a kept answer (`FORGE_CACHE_TTL_SECONDS`); 0 never answers from the cache fresh. */
  ttlSeconds: number
  /** How long past its freshness an answer may be sent when asking again fails (`FORGE_STALE_SECONDS`). */
  staleSeconds: number
  /** Bytes of answers kept in this process, at most. */
  maxBytes: number
  /** The wall clock in ms: replicas compare production times. Tests bring their own. */
  now: () => number
  /** Where replicas share answers (`REDIS_URL`); absent, everything stays in this process. */
  store?: SharedStore | undefined
  /** How replicas share one production; absent, each process produces alone. */
  lock?: ProductionLock | undefined
  /** Told how every request was answered, for `forge_cache_results_total`. */
  onResult: (endpoint: Endpoint, result: CacheResult) => void
}

/** A request's part in `get`: which endpoint asks, and the logger that carries its request id. */
export interface CacheRequest {
  endpoint: Endpoint
  log: FastifyBaseLogger
}

/**
 * The assembled answers of the endpoints (docs/design.md, "Caching", "Stale answers"). Within the
 * TTL a repeated request costs no upstream call, and is answered from this process's memory even
 * when answers are shared: every replica keeps an answer until the same `freshUntil`. Past the TTL
 * the answer is produced again, once for every concurrent request of this process and, with a
 * production lock, of every replica. When producing fails for any reason but an upstream 404 (the
 * budget's refusal included), the last answer is sent stale for up to `staleSeconds` more.
 */
export class ResponseCache {
  readonly #cache: CacheState
  readonly #inFlight = new Map<string, Promise<ServedAnswer>>()

  constructor(options: ResponseCacheOptions) {
    this.#cache = {
      options,
      ttlMs: options.ttlSeconds * 1000,
      staleMs: options.staleSeconds * 1000,
      kept: new KeptAnswers(options.maxBytes, options.store, options.now),
      droppedInFlight: new Set(),
    }
  }

  /**
   * The answer for `key`: fresh from memory (synchronously: the most frequent answer costs no
   * promise), or the one `produce` makes (once for every concurrent caller), or a stale one when
   * producing fails. Rejects with what `produce` rejected with when there is nothing to fall back on.
   */
  get(key: string, produce: Produce, request: CacheRequest): ServedAnswer | Promise<ServedAnswer> {
    const kept = this.#cache.kept.here(key)
    if (kept && isFresh(this.#cache, kept)) return this.#counted(request, { answer: kept, result: 'hit', stored: false })

    const pending = this.#inFlight.get(key)
    if (pending) return pending.then((served) => this.#counted(request, asCollapsed(served)))

    const production = resolveAnswer(this.#cache, key, this.#cache.kept.unexpired(key, kept), produce, request).finally(() => {
      this.#inFlight.delete(key)
      this.#cache.droppedInFlight.delete(key)
    })
    this.#inFlight.set(key, production)
    return production.then((served) => this.#counted(request, served))
  }

  /** Seconds `answer` stays fresh from now (what `Cache-Control: max-age` may promise). */
  secondsLeft(answer: CachedAnswer): number {
    return Math.max(0, Math.floor((answer.freshUntil - this.#cache.options.now()) / 1000))
  }

  /** Seconds since `answer` was produced (its `Age`). */
  ageOf(answer: CachedAnswer): number {
    return ageSeconds(answer, this.#cache.options.now())
  }

  /**
   * Makes this process's answer for `key` stale (docs/webhooks.md, "What a delivery drops"): kept,
   * so the next request revalidates it with its held projections and it can still be sent stale,
   * but never again a hit. A production under way is stored stale too. Returns the age (ms) of the
   * fresh answer it replaced, or undefined when there was none.
   */
  drop(key: string): number | undefined {
    if (this.#inFlight.has(key)) this.#cache.droppedInFlight.add(key)
    const kept = this.#cache.kept.peek(key)
    return kept && isFresh(this.#cache, kept) ? this.#cache.kept.makeStale(key, kept) : undefined
  }

  /**
   * `drop`, and the same in the shared store: its answer for `key` is written back stale, keeping
   * its expiry, so a replica that reads it on a memory miss revalidates. Resolves with the age (ms)
   * of the fresh answer it replaced, the shared one first; rejects when the shared store cannot say.
   */
  async dropEverywhere(key: string): Promise<number | undefined> {
    const here = this.drop(key)
    return (await this.#cache.kept.makeSharedStale(key)) ?? here
  }

  /** Drops every answer of this process: what to do when drops may have been missed. */
  dropAll(): void {
    for (const key of new Set([...this.#cache.kept.keys(), ...this.#inFlight.keys()])) this.drop(key)
  }

  #counted(request: CacheRequest, served: ServedAnswer): ServedAnswer {
    this.#cache.options.onResult(request.endpoint, served.result)
    return served
  }
}

/** What producing an answer reads and writes: the options, the answers kept, the keys dropped while produced. */
interface CacheState {
  options: ResponseCacheOptions
  ttlMs: number
  staleMs: number
  kept: KeptAnswers
  /** Keys dropped while their production was under way: what it read may predate the change. */
  droppedInFlight: Set<string>
}

function isFresh({ ttlMs, options }: CacheState, answer: CachedAnswer): boolean {
  return ttlMs > 0 && options.now() <= answer.freshUntil
}

function ageSeconds(answer: CachedAnswer, now: number): number {
  return Math.max(0, Math.floor((now - answer.producedAt) / 1000))
}

/** `key`'s answer past this process's memory: the shared one when fresh, else one produced, once for every replica when there is a lock. */
async function resolveAnswer(cache: CacheState, key: string, kept: CachedAnswer | undefined, produce: Produce, request: CacheRequest): Promise<ServedAnswer> {
  const { lock } = cache.options
  const last = cache.kept.newest(key, kept, await cache.kept.shared(key))
  if (last && isFresh(cache, last)) return { answer: last, result: 'hit', stored: false }
  if (!lock) return produceAnswer(cache, key, last, produce, request)

  const claim = await lock.claim(key)
  if (claim.kind === 'theirs') {
    await claim.released
    const theirs = await cache.kept.shared(key)
    if (theirs && isFresh(cache, theirs)) {
      cache.kept.keep(key, theirs)
      return { answer: theirs, result: 'collapsed', stored: false }
    }
    // Their production failed, or its holder died: produce it here.
  }
  try {
    return await produceAnswer(cache, key, last, produce, request)
  } finally {
    if (claim.kind === 'mine') claim.release()
  }
}

/** The answer `produce` makes, kept for as long as it may be sent; `last` stale when producing fails. */
async function produceAnswer(cache: CacheState, key: string, last: CachedAnswer | undefined, produce: Produce, request: CacheRequest): Promise<ServedAnswer> {
  let produced: Produced<string>
  try {
    produced = await produce({ log: request.log, revalidates: last !== undefined })
  } catch (error) {
    return staleOrThrow(cache, key, last, error, request)
  }

  const now = cache.options.now()
  const { body, partial, isPrivate, partialUntil } = produced
  // A partial answer is kept only while the rate limit of what it misses is spent, and no
  // longer than the TTL: a search that failed for another reason is asked again by the next request.
  const isPartial = partial.length > 0
  // Dropped meanwhile (docs/webhooks.md): kept for stale-if-error, but the next request revalidates.
  const freshUntil = cache.droppedInFlight.has(key) ? now - 1 : Math.min(now + cache.ttlMs, isPartial ? (partialUntil ?? now) : Number.POSITIVE_INFINITY)
  const keepUntil = isPartial ? freshUntil : freshUntil + cache.staleMs
  const answer: CachedAnswer = { body, partial: [...partial], isPrivate, etag: etagOf(body), producedAt: now, freshUntil, keepUntil }
  const stored = keepUntil > now
  if (stored) await cache.kept.store(key, answer)
  return { answer, result: last ? 'revalidated' : 'miss', stored }
}

/** `last`, stale, when producing failed with an upstream error; the error itself otherwise, or for a 404. */
function staleOrThrow(cache: CacheState, key: string, last: CachedAnswer | undefined, error: unknown, request: CacheRequest): ServedAnswer {
  // A user or repository that no longer exists is answered so, not with what it used to be.
  if (error instanceof UpstreamNotFound) {
    cache.kept.forget(key)
    throw error
  }
  if (!last || !(error instanceof UpstreamError)) throw error
  const staleBecause = error instanceof BudgetSpent ? 'budget' : 'stale-if-error'
  request.log.warn({ err: error, ageSeconds: ageSeconds(last, cache.options.now()) }, `answering stale (${staleBecause})`)
  return { answer: last, result: 'stale', stored: false, staleBecause, failedStatus: error.status }
}

/**
 * The answers kept: in this process's memory, bounded in bytes, and in the shared store when
 * there is one. Entries carry their own expiry on our clock (`keepUntil`): the LRU only bounds
 * their bytes.
 */
class KeptAnswers {
  readonly #local: LRUCache<string, CachedAnswer>
  readonly #store: SharedStore | undefined
  readonly #now: () => number

  constructor(maxBytes: number, store: SharedStore | undefined, now: () => number) {
    this.#local = new LRUCache({ maxSize: maxBytes, sizeCalculation: (answer) => answer.body.length })
    this.#store = store
    this.#now = now
  }

  /** `key`'s answer in memory, whatever its age. */
  here(key: string): CachedAnswer | undefined {
    return this.#local.get(key)
  }

  /** `kept`, unless it is past what it may be sent for, even stale: then it is forgotten. */
  unexpired(key: string, kept: CachedAnswer | undefined): CachedAnswer | undefined {
    if (!kept || kept.keepUntil > this.#now()) return kept
    this.#local.delete(key)
    return undefined
  }

  /** `key`'s answer in memory, whatever its age, without touching its place in the LRU. */
  peek(key: string): CachedAnswer | undefined {
    return this.#local.peek(key)
  }

  keys(): IterableIterator<string> {
    return this.#local.keys()
  }

  /** `key`'s answer in the shared store, while it may still be sent. */
  async shared(key: string): Promise<CachedAnswer | undefined> {
    const answer = await this.#store?.get(storedEntries.answer, `answer:${key}`)
    return answer && answer.keepUntil > this.#now() ? answer : undefined
  }

  /** The later of two productions of `key`, kept here when it is theirs. */
  newest(key: string, ours: CachedAnswer | undefined, theirs: CachedAnswer | undefined): CachedAnswer | undefined {
    if (!theirs || (ours && ours.producedAt >= theirs.producedAt)) return ours
    this.keep(key, theirs)
    return theirs
  }

  keep(key: string, answer: CachedAnswer): void {
    if (answer.keepUntil > this.#now()) this.#local.set(key, answer)
  }

  /** Keeps `answer` here and in the shared store; resolves once the store has it, for the next request on any replica to find. */
  async store(key: string, answer: CachedAnswer): Promise<void> {
    this.keep(key, answer)
    await this.#store?.set(`answer:${key}`, JSON.stringify(answer), answer.keepUntil - this.#now())
  }

  /** Forgets `key`'s answer here and in the shared store. */
  forget(key: string): void {
    this.#local.delete(key)
    this.#store?.delete(`answer:${key}`)
  }

  /** Makes `kept`, `key`'s fresh answer here, stale; returns its age (ms). */
  makeStale(key: string, kept: CachedAnswer): number {
    const now = this.#now()
    this.#local.set(key, { ...kept, freshUntil: now - 1 })
    return now - kept.producedAt
  }

  /** Makes `key`'s shared answer stale, keeping its expiry; its age (ms) when it was fresh. Rejects when the store cannot say. */
  async makeSharedStale(key: string): Promise<number | undefined> {
    if (!this.#store) return undefined
    const answer = await this.#store.read(storedEntries.answer, `answer:${key}`)
    const time = this.#now()
    if (!answer || time > answer.freshUntil) return undefined
    await this.#store.write(`answer:${key}`, JSON.stringify({ ...answer, freshUntil: time - 1 }), answer.keepUntil - time)
    return time - answer.producedAt
  }
}

/** What a request that waited on another's production got: the same answer, counted as collapsed. */
function asCollapsed(served: ServedAnswer): ServedAnswer {
  return served.result === 'miss' || served.result === 'revalidated' ? { ...served, result: 'collapsed', stored: false } : served
}

function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
}
