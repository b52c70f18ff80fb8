import type { SharedStore } from './shared-store.ts'

/** The upstream rate-limit resources this service spends: REST calls and searches. */
export type RateLimitResource = 'core' | 'search'

export const RATE_LIMIT_RESOURCES: readonly RateLimitResource[] = ['core', 'search']

/** What the upstream last said about one resource, on the wall clock (ms). */
export interface BudgetState {
  limit: number
  remaining: number
  /** When the upstream refills the resource (`X-RateLimit-Reset`). */
  resetAt: number
  /** No call before this: a rate-limit answer said to wait (`Retry-After`, or the reset). */
  blockedUntil: number
}

export interface RateLimitBudgetOptions {
  /** Share of the core limit kept for users never seen (`FORGE_BUDGET_RESERVE`). */
  reserve: number
  /** The wall clock in ms: reset times come from the upstream as epoch seconds. */
  now: () => number
  /** Where replicas share what they learn; absent, the budget is this process's alone. */
  shared?: Pick<SharedStore, 'get' | 'set'> | undefined
  /** Told of every change, for the rate-limit gauges. */
  onChange?: (resource: RateLimitResource, state: BudgetState) => void
}

/** Headers as undici gives them. */
type Headers = Record<string, string | string[] | undefined>

/**
 * The upstream's rate-limit budget, from the `X-RateLimit-*` headers of every answer (DESIGN §7).
 * GitHub asks integrations to stop calling a spent resource until it resets ("continuing may
 * result in the banning of your integration"), so a spent resource is not called at all.
 * With a shared store, every replica's answers feed one budget: a limit one replica hit is
 * respected by all.
 */
export class RateLimitBudget {
  readonly #options: RateLimitBudgetOptions
  readonly #states = new Map<RateLimitResource, BudgetState>()

  constructor(options: RateLimitBudgetOptions) {
    this.#options = options
  }

  /** Learns from one upstream answer: its rate-limit headers, and `retryAfterSeconds` when it was a rate limit. */
  record(path: string, headers: Headers, retryAfterSeconds?: number): void {
    const resource = resourceOf(path, headers)
    if (!resource) return
    const now = this.#options.now()
    const before = this.#states.get(resource)
    const limit = integerHeader(headers['x-ratelimit-limit'])
    const remaining = integerHeader(headers['x-ratelimit-remaining'])
    const reset = integerHeader(headers['x-ratelimit-reset'])
    if (limit === undefined && remaining === undefined && retryAfterSeconds === undefined) return
    const state: BudgetState = {
      limit: limit ?? before?.limit ?? 0,
      remaining: remaining ?? before?.remaining ?? Number.MAX_SAFE_INTEGER,
      resetAt: reset === undefined ? (before?.resetAt ?? 0) : reset * 1000,
      blockedUntil: Math.max(before?.blockedUntil ?? 0, retryAfterSeconds === undefined ? 0 : now + retryAfterSeconds * 1000),
    }
    this.#set(resource, state)
    const expiresAt = Math.max(state.resetAt, state.blockedUntil)
    if (expiresAt > now) void this.#options.shared?.set(`budget:${resource}`, JSON.stringify(state), expiresAt - now)
  }

  /** When calls to `resource` may resume, on the wall clock; undefined while it has calls left. */
  blockedUntil(resource: RateLimitResource): number | undefined {
    const state = this.#states.get(resource)
    if (!state) return undefined
    const now = this.#options.now()
    const until = Math.max(state.blockedUntil, state.remaining <= 0 ? state.resetAt : 0)
    return until > now ? until : undefined
  }

  /** Whether less than the reserve of the core limit is left before its reset. */
  isBelowReserve(): boolean {
    const state = this.#states.get('core')
    if (!state || state.limit === 0 || state.resetAt <= this.#options.now()) return false
    return state.remaining < state.limit * this.#options.reserve
  }

  /** Takes in what other replicas learned (a no-op without a shared store). */
  async refresh(): Promise<void> {
    const { shared } = this.#options
    if (!shared) return
    const values = await Promise.all(RATE_LIMIT_RESOURCES.map((resource) => shared.get(`budget:${resource}`)))
    RATE_LIMIT_RESOURCES.forEach((resource, index) => {
      const value = values[index]
      if (value !== undefined) this.#merge(resource, JSON.parse(value) as BudgetState)
    })
  }

  /** Keeps the later window, and within one window the lower remaining and the later block. */
  #merge(resource: RateLimitResource, theirs: BudgetState): void {
    const ours = this.#states.get(resource)
    if (ours && ours.resetAt > theirs.resetAt) return
    if (!ours || theirs.resetAt > ours.resetAt) {
      this.#set(resource, theirs)
      return
    }
    this.#set(resource, {
      limit: Math.max(ours.limit, theirs.limit),
      remaining: Math.min(ours.remaining, theirs.remaining),
      resetAt: ours.resetAt,
      blockedUntil: Math.max(ours.blockedUntil, theirs.blockedUntil),
    })
  }

  #set(resource: RateLimitResource, state: BudgetState): void {
    this.#states.set(resource, state)
    this.#options.onChange?.(resource, state)
  }
}

/**
 * The resource a call to `path` (below the API root) counts against: the answer's
 * `X-RateLimit-Resource` when it names one, else what the path says.
 */
function resourceOf(path: string, headers: Headers): RateLimitResource | undefined {
  const named = headers['x-ratelimit-resource']
  if (named === 'core' || named === 'search') return named
  return named === undefined ? resourceOfPath(path) : undefined
}

/** The resource a call to `path` counts against, as GitHub documents it: searches apart, all else core. */
export function resourceOfPath(path: string): RateLimitResource {
  return path.startsWith('/search/') ? 'search' : 'core'
}

function integerHeader(value: string | string[] | undefined): number | undefined {
  return typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : undefined
}
