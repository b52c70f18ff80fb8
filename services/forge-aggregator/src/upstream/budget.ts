import type { IncomingHttpHeaders } from 'node:http'
import { storedEntries, type BudgetState } from '../shared-cache/stored.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import type { RequestContext } from './request-context.ts'

/**
 * The upstream's rate limits as this service keeps count of them (docs/design.md, "Rate-limit
 * budget"): one budget per credential, fed by every answer, shared by the replicas through Redis.
 */

export type { BudgetState } from '../shared-cache/stored.ts'

/** The upstream rate-limit resources this service spends: REST calls and searches. */
export type RateLimitResource = 'core' | 'search'

export const RATE_LIMIT_RESOURCES: readonly RateLimitResource[] = ['core', 'search']

export interface RateLimitBudgetOptions {
  /** Share of the core limit kept for users never seen (`FORGE_BUDGET_RESERVE`). */
  reserve: number
  /** The wall clock in ms: reset times come from the upstream as epoch seconds. */
  now: () => number
  /** Where replicas share what they learn; absent, the budget is this process's alone. */
  store?: Pick<SharedStore, 'get' | 'set'> | undefined
  /** Told of every change, for the rate-limit gauges. */
  onChange?: (resource: RateLimitResource, state: BudgetState) => void
  /**
   * Where in `store` its states go: `budget:` and the resource unless given. A public App keeps one
   * budget per installation (`budget:installation:<id>:`), since each has its own quota.
   */
  keyPrefix?: string
}

/**
 * The upstream's rate-limit budget, from the `X-RateLimit-*` headers of every answer
 * (docs/design.md, "Rate-limit budget").
 * GitHub asks integrations to stop calling a spent resource until it resets ("continuing may
 * result in the banning of your integration"), so a spent resource is not called at all.
 * With a shared store, every replica's answers feed one budget: a limit one replica hit is
 * respected by all. It is applied in one place, the client's `send`: before each call, and with
 * each answer.
 */
export class RateLimitBudget {
  readonly #options: RateLimitBudgetOptions
  readonly #prefix: string
  readonly #states = new Map<RateLimitResource, BudgetState>()
  #refreshing: Promise<void> | undefined

  constructor(options: RateLimitBudgetOptions) {
    this.#options = options
    this.#prefix = options.keyPrefix ?? 'budget:'
  }

  /** Learns from one upstream answer: its rate-limit headers, and `retryAfterSeconds` when it was a rate limit. */
  record(called: RateLimitResource, headers: IncomingHttpHeaders, retryAfterSeconds?: number): void {
    const resource = resourceOf(called, headers)
    if (!resource) return
    const now = this.#options.now()
    const state = stateAfter(this.#states.get(resource), headers, now, retryAfterSeconds)
    if (!state) return
    this.#set(resource, state)
    const expiresAt = Math.max(state.resetAt, state.blockedUntil)
    if (expiresAt > now) void this.#options.store?.set(`${this.#prefix}${resource}`, JSON.stringify(state), expiresAt - now)
  }

  /**
   * When a call spending `resource` for `request` may be made, on the wall clock; undefined when it
   * may be made now. A spent core stops every call: no answer this service gives can succeed
   * without it, so a search alone would be spent for nothing.
   */
  resumesAt(resource: RateLimitResource, request?: Pick<RequestContext, 'revalidates'>): number | undefined {
    const now = this.#options.now()
    const until = Math.max(this.#blockedUntil('core'), resource === 'core' ? 0 : this.#blockedUntil(resource))
    if (until > now) return until
    if (request?.revalidates && this.#isBelowReserve()) return this.#states.get('core')?.resetAt
    return undefined
  }

  /** Takes in what other replicas learned (a no-op without a shared store); concurrent callers share one read. */
  refresh(): Promise<void> {
    const { store } = this.#options
    if (!store) return Promise.resolve()
    this.#refreshing ??= Promise.all(RATE_LIMIT_RESOURCES.map((resource) => store.get(storedEntries.budget, `${this.#prefix}${resource}`)))
      .then((states) => {
        RATE_LIMIT_RESOURCES.forEach((resource, index) => {
          const state = states[index]
          if (state !== undefined) this.#merge(resource, state)
        })
      })
      .finally(() => (this.#refreshing = undefined))
    return this.#refreshing
  }

  #blockedUntil(resource: RateLimitResource): number {
    const state = this.#states.get(resource)
    if (!state) return 0
    return Math.max(state.blockedUntil, state.remaining <= 0 ? state.resetAt : 0)
  }

  /** Whether less than the reserve of the core limit is left before its reset. */
  #isBelowReserve(): boolean {
    const state = this.#states.get('core')
    if (!state || state.limit === 0 || state.resetAt <= this.#options.now()) return false
    return state.remaining < state.limit * this.#options.reserve
  }

  #merge(resource: RateLimitResource, theirs: BudgetState): void {
    const merged = mergedState(this.#states.get(resource), theirs)
    if (merged) this.#set(resource, merged)
  }

  #set(resource: RateLimitResource, state: BudgetState): void {
    this.#states.set(resource, state)
    this.#options.onChange?.(resource, state)
  }
}

/** What one answer's rate-limit headers (and its wait, when it was a rate limit) make of `before`; undefined when they say nothing. */
function stateAfter(before: BudgetState | undefined, headers: IncomingHttpHeaders, now: number, retryAfterSeconds: number | undefined): BudgetState | undefined {
  const limit = integerHeader(headers['x-ratelimit-limit'])
  const remaining = integerHeader(headers['x-ratelimit-remaining'])
  const reset = integerHeader(headers['x-ratelimit-reset'])
  if (limit === undefined && remaining === undefined && retryAfterSeconds === undefined) return undefined
  return {
    limit: limit ?? before?.limit ?? 0,
    remaining: remaining ?? before?.remaining ?? Number.MAX_SAFE_INTEGER,
    resetAt: reset === undefined ? (before?.resetAt ?? 0) : reset * 1000,
    blockedUntil: Math.max(before?.blockedUntil ?? 0, retryAfterSeconds === undefined ? 0 : now + retryAfterSeconds * 1000),
  }
}

/** Another replica's state beside ours: the later window, and within one window the lower remaining and the later block; undefined when ours stands. */
function mergedState(ours: BudgetState | undefined, theirs: BudgetState): BudgetState | undefined {
  if (ours && ours.resetAt > theirs.resetAt) return undefined
  if (!ours || theirs.resetAt > ours.resetAt) return theirs
  return {
    limit: Math.max(ours.limit, theirs.limit),
    remaining: Math.min(ours.remaining, theirs.remaining),
    resetAt: ours.resetAt,
    blockedUntil: Math.max(ours.blockedUntil, theirs.blockedUntil),
  }
}

/**
 * The resource a call counts against: the answer's `X-RateLimit-Resource` when it names one,
 * else the one the call was made for; a resource this service does not spend is ignored.
 */
function resourceOf(called: RateLimitResource, headers: IncomingHttpHeaders): RateLimitResource | undefined {
  const named = headers['x-ratelimit-resource']
  if (named === 'core' || named === 'search') return named
  return named === undefined ? called : undefined
}

/** The resource a call to `path` counts against, as GitHub documents it: searches apart, all else core. */
export function resourceOfPath(path: string): RateLimitResource {
  return path.startsWith('/search/') ? 'search' : 'core'
}

function integerHeader(value: string | string[] | undefined): number | undefined {
  return typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : undefined
}
