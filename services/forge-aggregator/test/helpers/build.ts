import type { Test } from 'tap'
import { eventually } from '@repo/test-support'
import { pino } from 'pino'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppConfig } from '../../src/app.ts'
import { createForgeClient, type ForgeClient } from '../../src/forge-client.ts'
import { Registry } from 'prom-client'
import { createUpstreamMetrics } from '../../src/metrics.ts'
import { RateLimitBudget } from '../../src/rate-limit-budget.ts'
import { createRedisStore, namespaceFor } from '../../src/redis-store.ts'
import type { SharedStore } from '../../src/shared-store.ts'
import { API } from './upstream.ts'

export const DEFAULT_CONFIG: AppConfig = {
  FORGE_DEFAULT_USER: 'octocat',
  FORGE_CACHE_TTL_SECONDS: 60,
  FORGE_CACHE_MAX_MB: 64,
  FORGE_FOLLOWERS_LIMIT: 30,
  FORGE_MAX_REPO_PAGES: 10,
  FORGE_TIMEOUT_MS: 2_000,
  FORGE_STALE_SECONDS: 86_400,
}

export interface BuildOptions {
  config?: Partial<AppConfig>
  baseUrl?: string
  timeoutMs?: number
  revalidationMaxBytes?: number
  /** FORGE_BUDGET_RESERVE; 0.1 unless given. */
  budgetReserve?: number
  /** The clock to share with other apps of the test; one of its own unless given. */
  clock?: TestClock
  /** A Redis to share answers through, as REDIS_URL does; absent, everything stays in the app. */
  redisUrl?: string
  /** The Redis read deadline: 1 s unless given, so that a loaded test machine does not look like a hung Redis. */
  redisDeadlineMs?: number
}

/** A wall clock that only moves when the test says so, starting at the real time. */
export interface TestClock {
  now: () => number
  advance: (ms: number) => void
}

export function testClock(): TestClock {
  let time = Math.floor(Date.now() / 1000) * 1000
  return { now: () => time, advance: (ms) => (time += ms) }
}

export interface TestAggregator {
  app: FastifyInstance
  client: ForgeClient
  /** Every log line, as written (trace level: everything the service can log). */
  logLines: string[]
  /** Moves the clock of the cache and the budget forward. */
  advanceClock: (ms: number) => void
  /** The current time on that clock (ms). */
  now: () => number
  /** The store shared through Redis, when `redisUrl` was given. */
  shared: SharedStore | undefined
  /** The app's and the client's metrics. */
  metrics: Registry
}

/** The production app and upstream client, pointed at nock (or `baseUrl`), on a clock the test controls. */
export async function buildAggregator(t: Test, options: BuildOptions = {}): Promise<TestAggregator> {
  const config = { ...DEFAULT_CONFIG, ...options.config }
  const logLines: string[] = []
  const logger = pino({ level: 'trace' }, { write: (line: string) => logLines.push(line) })
  const clock = options.clock ?? testClock()
  const metrics = new Registry()
  const upstreamMetrics = createUpstreamMetrics(metrics)
  const shared = options.redisUrl
    ? createRedisStore({
        url: options.redisUrl,
        namespace: namespaceFor({ FORGE_API_URL: options.baseUrl ?? API, ...config }),
        logger,
        deadlineMs: options.redisDeadlineMs ?? 1_000,
        probeIntervalMs: 100,
      })
    : undefined
  const client = createForgeClient({
    baseUrl: options.baseUrl ?? API,
    token: config.FORGE_TOKEN,
    timeoutMs: options.timeoutMs ?? 2_000,
    userAgent: 'forge-aggregator/test',
    revalidationMaxBytes: options.revalidationMaxBytes ?? 1024 * 1024,
    budget: new RateLimitBudget({ reserve: options.budgetReserve ?? 0.1, now: clock.now, shared, onChange: upstreamMetrics.observeBudget }),
    shared,
    metrics: upstreamMetrics,
    now: clock.now,
    logger,
  })
  const app = await buildApp(config, { client, logger, now: clock.now, shared, metrics })
  t.teardown(async () => {
    await app.close()
    await client.close()
    await shared?.close()
  })
  if (shared && !(await eventually(async () => shared.isAvailable))) throw new Error('the shared store never became available')
  return { app, client, logLines, advanceClock: clock.advance, now: clock.now, shared, metrics }
}
