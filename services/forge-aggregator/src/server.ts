import { Registry } from 'prom-client'
import { runService } from '@repo/service-kit'
import { buildApp, RESPONSE_CACHE_SHARE } from './app.ts'
import { ForgeAggregatorConfig } from './config.ts'
import { createUpstreamMetrics } from './metrics.ts'
import { createForgeClient } from './forge-client.ts'
import { RateLimitBudget } from './rate-limit-budget.ts'
import { createRedisStore, namespaceFor } from './redis-store.ts'

await runService({
  config: ForgeAggregatorConfig,
  env: process.env,
  async start(config, logger) {
    // One registry for the client's and the app's metrics, served at /metrics.
    const metrics = new Registry()
    const upstreamMetrics = createUpstreamMetrics(metrics)
    const shared = config.REDIS_URL
      ? createRedisStore({ url: config.REDIS_URL, namespace: namespaceFor(config), logger })
      : undefined
    const client = createForgeClient({
      baseUrl: config.FORGE_API_URL,
      token: config.FORGE_TOKEN,
      timeoutMs: config.FORGE_TIMEOUT_MS,
      userAgent: 'forge-aggregator/1.0',
      // Caching off (TTL 0) means nothing is held for revalidation either.
      revalidationMaxBytes:
        config.FORGE_CACHE_TTL_SECONDS === 0 ? 0 : config.FORGE_CACHE_MAX_MB * 1024 * 1024 * (1 - RESPONSE_CACHE_SHARE),
      budget: new RateLimitBudget({ reserve: config.FORGE_BUDGET_RESERVE, now: Date.now, shared, onChange: upstreamMetrics.observeBudget }),
      shared,
      metrics: upstreamMetrics,
      logger,
    })
    const app = await buildApp(config, { client, logger, shared, metrics })
    logger.info({ upstream: config.FORGE_API_URL, authenticated: config.FORGE_TOKEN !== undefined }, 'forge upstream')
    return {
      app,
      async close() {
        await Promise.all([client.close(), shared?.close()])
      },
    }
  },
})
