import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { BudgetState, RateLimitResource } from './budget.ts'
import type { LookupOutcome } from '../credentials/installation-lookup.ts'

/**
 * The upstream client's metrics (docs/monitoring.md, "Metrics"): its calls, their credentials, the
 * budget they leave, a public App's lookups and tokens.
 */

/**
 * Whose credential a call goes with: none, a personal token, the App's default installation (the
 * only one without `FORGE_APP_PUBLIC`), or the installation of the account the call is about.
 * Never an installation's id: a public App may have any number.
 */
export type CredentialKind = 'anonymous' | 'token' | 'app-default' | 'app-account'
const CREDENTIAL_KINDS: readonly CredentialKind[] = ['anonymous', 'token', 'app-default', 'app-account']

/** What the upstream client reports (docs/monitoring.md, "Metrics"): its calls, their cost, and the budget they leave. */
export interface UpstreamMetrics {
  /** One call answered `status` (an HTTP code, or `error` when no answer came) after `seconds`. */
  observeCall: (resource: RateLimitResource, status: number | 'error', seconds: number) => void
  /** What the upstream last said of a resource's rate limit (of the default credential: one installation's of a public App are not labelled). */
  observeBudget: (resource: RateLimitResource, state: BudgetState) => void
  /** One call went (`sent`), or its credential's budget was spent and it did not (`budget_spent`). */
  observeCredential: (kind: CredentialKind, outcome: 'sent' | 'budget_spent') => void
  /** One lookup of an account's installation of a public App. */
  observeLookup: (outcome: LookupOutcome) => void
  /** How many installation tokens the process has in memory, read at each scrape. */
  countTokensInMemory: (count: () => number) => void
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
  const credentialCalls = new Counter({
    name: 'forge_upstream_credential_calls_total',
    help: 'Upstream calls by kind of credential: sent, or not made because that credential’s rate limit was spent',
    labelNames: ['credential', 'outcome'] as const,
    registers: [registry],
  })
  for (const credential of CREDENTIAL_KINDS) for (const outcome of ['sent', 'budget_spent']) credentialCalls.inc({ credential, outcome }, 0)
  const lookups = new Counter({
    name: 'forge_app_installation_lookups_total',
    help: 'Lookups of an account’s installation of the public GitHub App (GET /users/{login}/installation), by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  })
  for (const outcome of ['installed', 'not_installed', 'failed']) lookups.inc({ outcome }, 0)
  return {
    observeCredential: (credential, outcome) => credentialCalls.inc({ credential, outcome }),
    observeLookup: (outcome) => lookups.inc({ outcome }),
    // Counted where the tokens are, at each scrape: one client per app registers it once.
    countTokensInMemory: (count) =>
      void new Gauge({
        name: 'forge_app_installation_tokens_held',
        help: 'GitHub App installation tokens this process holds (in memory only)',
        registers: [registry],
        collect() {
          this.set(count())
        },
      }),
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
