import { Registry } from 'prom-client'
import { runService } from '@repo/service-kit'
import { buildApp } from './app.ts'
import { ItemsListConfig } from './config.ts'
import { createRedisItemStore } from './item-store.ts'

await runService({
  config: ItemsListConfig,
  env: process.env,
  async start(config, logger) {
    const metrics = new Registry()
    const store = createRedisItemStore({
      url: config.REDIS_URL,
      host: config.REDIS_HOST,
      port: config.REDIS_PORT,
      password: config.REDIS_PASSWORD,
      database: config.REDIS_DB,
      key: config.ITEMS_KEY,
      idempotencyTtlSeconds: config.IDEMPOTENCY_TTL_SECONDS,
      metrics,
      logger,
    })
    const app = await buildApp(config, { store, logger, metrics, rateLimitRedis: store.redis })
    // After the app has closed, so that in-flight requests still reach Redis.
    return { app, close: () => store.close() }
  },
})
