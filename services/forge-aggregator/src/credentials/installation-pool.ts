import type { KeyObject } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { SharedStore } from '../shared-cache/store.ts'
import { RateLimitBudget } from '../upstream/budget.ts'
import type { AppRequest } from './app-calls.ts'
import { createInstallationTokens, type InstallationTokens } from './installation-token.ts'

/**
 * The installations of a public App one process calls with (docs/github-app.md, "How an
 * account's installation is found, and the tokens"): a token and a rate-limit budget each.
 */

/** Installations in one process's pool at most, their tokens and budgets (least recently used first out). */
export const POOLED_INSTALLATIONS = 1_000
/** Tokens of installations let go from the pool, kept for redaction only: a late failure may still quote one. */
const RETIRED_SECRETS = 64

export interface InstallationPoolOptions {
  appId: string
  privateKey: KeyObject
  send: AppRequest
  now: () => number
  logger: FastifyBaseLogger
  store?: SharedStore | undefined
  reserve: number
}

/** The installations of a public App this process calls with: a token and a budget each, at most `POOLED_INSTALLATIONS` of them. */
export interface InstallationPool {
  /** The token of installation `id`, minted when first needed (`createInstallationTokens`: one mint at a time). */
  tokensOf(id: string): InstallationTokens
  /** The rate-limit budget of installation `id`, shared by the replicas under its own key. */
  budgetOf(id: string): RateLimitBudget
  /** The installation is gone or suspended: its token is forgotten. */
  forget(id: string): void
  /** How many installations have a token in memory now. */
  tokensInMemory(): number
  /** Every token in memory, and the last ones let go, for redaction. */
  secrets(): string[]
}

/**
 * Each replica mints and keeps its own token per installation (tokens are never shared: not in
 * Redis), so N replicas mint at most N an hour per installation; concurrent calls share a mint.
 */
export function createInstallationPool({ appId, privateKey, send, now, logger, store, reserve }: InstallationPoolOptions): InstallationPool {
  const retired: string[] = []
  const tokens = new LRUCache<string, InstallationTokens>({
    max: POOLED_INSTALLATIONS,
    dispose: (evicted) => {
      retired.push(...evicted.secrets())
      retired.splice(0, Math.max(0, retired.length - RETIRED_SECRETS))
    },
  })
  const budgets = new LRUCache<string, RateLimitBudget>({ max: POOLED_INSTALLATIONS })
  return {
    tokensOf(id) {
      let pooled = tokens.get(id)
      if (!pooled) {
        pooled = createInstallationTokens({ app: { appId, installationId: id, privateKey }, now, send, logger })
        tokens.set(id, pooled)
      }
      return pooled
    },
    budgetOf(id) {
      let budget = budgets.get(id)
      if (!budget) {
        budget = new RateLimitBudget({ reserve, now, store, keyPrefix: `budget:installation:${id}:` })
        budgets.set(id, budget)
      }
      return budget
    },
    forget(id) {
      tokens.get(id)?.forget()
      tokens.delete(id)
    },
    tokensInMemory: () => [...tokens.values()].filter((each) => each.hasToken()).length,
    secrets: () => [...[...tokens.values()].flatMap((each) => each.secrets()), ...retired],
  }
}
