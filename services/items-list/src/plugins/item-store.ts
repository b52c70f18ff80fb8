import fp from 'fastify-plugin'
import { createRedisConnection, type RateLimitRedis, type RedisTarget } from '@repo/service-kit'
import type { ItemsListConfig } from '../config.ts'
import { createItemStore, ITEM_STORE_SCRIPTS, type ItemStore } from '../item-store.ts'
import { createStoreMetrics, STORE_UP_GAUGE } from '../store-metrics.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The list in Redis: what the routes read and write. */
    itemStore: ItemStore
    /**
     * The store's Redis connection, for what must be counted where the list lives: the rate
     * limit, so that replicas on one Redis share each client's count.
     */
    itemStoreRedis: RateLimitRedis
  }
}

export interface ItemStorePluginOptions {
  config: Pick<
    ItemsListConfig,
    'REDIS_URL' | 'REDIS_HOST' | 'REDIS_PORT' | 'REDIS_PASSWORD' | 'REDIS_DB' | 'ITEMS_KEY' | 'IDEMPOTENCY_TTL_SECONDS'
  >
}

/**
 * Opens the item store's Redis connection from the configuration (without waiting for Redis: the
 * service starts while it is down), decorates the app with the store, adds the store's metrics to
 * `app.metrics`, and closes the connection when the app closes, after the server has stopped and
 * its in-flight requests have had their answers.
 */
export const itemStore = fp<ItemStorePluginOptions>(
  async (app, { config }) => {
    const connection = createRedisConnection({
      target: redisTarget(config),
      scripts: ITEM_STORE_SCRIPTS,
      logger: app.log,
      purpose: 'item store',
      onCommand: createStoreMetrics(app.metrics),
      up: { registry: app.metrics, ...STORE_UP_GAUGE },
    })
    app.decorate('itemStore', createItemStore(connection, { key: config.ITEMS_KEY, idempotencyTtlSeconds: config.IDEMPOTENCY_TTL_SECONDS }))
    app.decorate('itemStoreRedis', connection.client)
    app.addHook('onClose', () => connection.close())
  },
  { name: 'item-store', fastify: '5.x', decorators: { fastify: ['metrics'] } },
)

/** `REDIS_URL` when set, else `REDIS_HOST`, `REDIS_PORT`, `REDIS_PASSWORD` and `REDIS_DB`. */
function redisTarget(config: ItemStorePluginOptions['config']): RedisTarget {
  if (config.REDIS_URL !== undefined) return { url: config.REDIS_URL }
  return { host: config.REDIS_HOST, port: config.REDIS_PORT, password: config.REDIS_PASSWORD, database: config.REDIS_DB }
}
