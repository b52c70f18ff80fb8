import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { BudgetState, RateLimitResource } from './budget.ts'

/** What the upstream client reports (docs/monitoring.md, "Metrics"): its calls, their cost, and the budget they leave. */
export interface UpstreamMetrics {
  /** One call answered `status` (an HTTP code, or `error` when no answer came) after `seconds`. */
  observeCall: (resource: RateLimitResource, status: number | 'error', seconds: number) => void
  /** What the upstream last said of a resource's rate limit. */
  observeBudget: (resource: RateLimitResource, state: BudgetState) => void
}

/**
 * Registers the upstream metrics on `registry` (one per app: tests build several in one process).
 * `reserve` is `FORGE_BUDGET_RESERVE`, exposed so that an alert can compare what is left with it.
 */
export function createUpstreamMetrics(registry: Registry, reserve: number): UpstreamMetrics {
  const requests = new Counter({
    name: 'forge_upstream_requests_total',
    help: 'Upstream calls made, by rate-limit resource and answer status (error: no answer)',
    labelNames: ['resource', 'status'] as const,
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'forge_upstream_request_duration_seconds',
    help: 'Time from sending an upstream call to having its whole answer',
    labelNames: ['resource'] as const,
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })
  const remaining = new Gauge({
    name: 'forge_ratelimit_remaining',
    help: 'Calls the upstream says are left in the current rate-limit window',
    labelNames: ['resource'] as const,
    registers: [registry],
  })
  const limit = new Gauge({
    name: 'forge_ratelimit_limit',
    help: 'Calls the upstream allows in one rate-limit window',
    labelNames: ['resource'] as const,
    registers: [registry],
  })
  // The reserve applies to the core limit only (RateLimitBudget): labelled so, it matches
  // forge_ratelimit_limit{resource="core"} series for series in a query.
  new Gauge({
    name: 'forge_ratelimit_reserve_ratio',
    help: 'Share of the core rate limit kept for users never seen (FORGE_BUDGET_RESERVE)',
    labelNames: ['resource'] as const,
    registers: [registry],
  }).set({ resource: 'core' }, reserve)
  const reset = new Gauge({
    name: 'forge_ratelimit_reset_timestamp_seconds',
    help: 'When the upstream refills the rate limit (Unix time)',
    labelNames: ['resource'] as const,
    registers: [registry],
  })
  return {
    observeCall: (resource, status, seconds) => {
      requests.inc({ resource, status: String(status) })
      duration.observe({ resource }, seconds)
    },
    observeBudget: (resource, state) => {
      // A remaining count the upstream never sent is unknown, not "millions left".
      if (state.remaining !== Number.MAX_SAFE_INTEGER) remaining.set({ resource }, state.remaining)
      if (state.limit > 0) limit.set({ resource }, state.limit)
      if (state.resetAt > 0) reset.set({ resource }, state.resetAt / 1000)
    },
  }
}
