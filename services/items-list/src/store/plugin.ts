// The item store as a Fastify plugin: its Redis connection opened from the configuration (host or
// URL, TLS, ACL user, Sentinel), its metrics, the background move of an earlier list, all closed with the app.
import fp from 'fastify-plugin'
import { redisSentinels } from '@repo/config'
import { createRedisConnection, type RateLimitRedis, type RedisTarget } from '@repo/service-kit'
import type { ItemsListConfig } from '../config.ts'
import { createItemStore, type ItemStore } from './item-store.ts'
import type { StoreCommand } from './metrics.ts'
import { ITEM_STORE_SCRIPTS } from './scripts.ts'
import { createAppendGroupMetric, createInconsistencyMetric, createListMetrics, createStoreMetrics, STORE_UP_GAUGE } from './metrics.ts'
import { migrateInBackground } from './migration.ts'
import { createFeedReader, createFeedReads, type FeedReader, type FeedReads } from './change-feed.ts'
import { createListClient } from './list-client.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The list in Redis: what the routes read and write. */
    itemStore: ItemStore
    /**
     * The store's Redis connection, for what must be counted where the list lives: the rate
     * limit, so that replicas on one Redis share each client's count.
     */
    itemStoreRedis: RateLimitRedis
    /** The list's change feed: its reads, and the replica's one reader of new events. */
    itemFeed: { reads: FeedReads; reader: FeedReader }
  }
}

export interface ItemStorePluginOptions {
  config: Pick<
    ItemsListConfig,
    | 'REDIS_URL'
    | 'REDIS_HOST'
    | 'REDIS_PORT'
    | 'REDIS_USERNAME'
    | 'REDIS_PASSWORD'
    | 'REDIS_CA_FILE'
    | 'REDIS_DEADLINE_MS'
    | 'REDIS_DB'
    | 'REDIS_SENTINELS'
    | 'REDIS_SENTINEL_NAME'
    | 'ITEMS_KEY'
    | 'ITEMS_MAX_COUNT'
    | 'IDEMPOTENCY_TTL_SECONDS'
    | 'ITEMS_MIN_REPLICAS_ACK'
    | 'ITEMS_EVENTS_KEPT'
  >
}

/**
 * Opens the item store's Redis connection from the configuration (without waiting for Redis: the
 * service starts while it is down), decorates the app with the store, adds the store's metrics to
 * `app.metrics`, starts moving an earlier version's list into chunks, and closes the connection
 * when the app closes, after the server has stopped and its in-flight requests have had their answers.
 */
export const itemStore = fp<ItemStorePluginOptions>(
  async (app, { config }) => {
    const target = redisTarget(config)
    const onCommand = createStoreMetrics(app.metrics)
    const deadlineMs = config.REDIS_DEADLINE_MS
    const connection = createRedisConnection({
      target,
      scripts: ITEM_STORE_SCRIPTS,
      logger: app.log,
      purpose: 'item store',
      deadlineMs,
      onCommand,
      up: { registry: app.metrics, ...STORE_UP_GAUGE },
    })
    // Appends that wait for replicas get a connection of their own (see ItemStoreSettings.appends).
    const appends =
      config.ITEMS_MIN_REPLICAS_ACK > 0
        ? createRedisConnection({ target, scripts: ITEM_STORE_SCRIPTS, logger: app.log, purpose: 'item store appends', deadlineMs, onCommand })
        : undefined
    const countInconsistency = createInconsistencyMetric(app.metrics)
    const settings = {
      key: config.ITEMS_KEY,
      maxCount: config.ITEMS_MAX_COUNT,
      idempotencyTtlSeconds: config.IDEMPOTENCY_TTL_SECONDS,
      minReplicasAck: config.ITEMS_MIN_REPLICAS_ACK,
      eventsKept: config.ITEMS_EVENTS_KEPT,
      onAppendGroup: createAppendGroupMetric(app.metrics),
      onInconsistent(command: StoreCommand, reason: string) {
        countInconsistency(command)
        app.log.error({ command, reason, key: config.ITEMS_KEY }, "the list's keys disagree: refusing to append, read or delete until they are repaired or the list is reset")
      },
    }
    const store = createItemStore(connection, appends ? { ...settings, appends } : settings)
    // Neither the scrape nor the migration sends a command to a Redis known to be away: each
    // would count as the store failing, and says nothing new.
    const isAvailable = () => connection.isAvailable
    createListMetrics(app.metrics, config.ITEMS_MAX_COUNT, () => store.counts(), isAvailable)
    const stopMigrating = migrateInBackground(store, isAvailable, app.log)
    const feedReads = createFeedReads(createListClient(connection, settings))
    const feedReader = createFeedReader(connection, feedReads, `${config.ITEMS_KEY}:events`, app.log)
    app.decorate('itemStore', store)
    app.decorate('itemFeed', { reads: feedReads, reader: feedReader })
    app.decorate<RateLimitRedis>('itemStoreRedis', connection.client)
    app.addHook('onClose', async () => {
      stopMigrating()
      feedReader.stop()
      await Promise.all([connection.close(), appends?.close()])
    })
  },
  { name: 'item-store', fastify: '5.x', decorators: { fastify: ['metrics'] } },
)

/**
 * `REDIS_SENTINELS` (with `REDIS_DB` for the primary) or `REDIS_URL`, never both (a
 * `ConfigError`), else `REDIS_HOST`, `REDIS_PORT` and `REDIS_DB`; as `REDIS_USERNAME`, trusting `REDIS_CA_FILE`.
 */
export function redisTarget(config: ItemStorePluginOptions['config']): RedisTarget {
  const auth = { username: config.REDIS_USERNAME, password: config.REDIS_PASSWORD, caFile: config.REDIS_CA_FILE }
  const sentinels = redisSentinels(config)
  if (sentinels) return { ...sentinels, database: config.REDIS_DB, ...auth }
  if (config.REDIS_URL !== undefined) return { url: config.REDIS_URL, ...auth }
  return { host: config.REDIS_HOST, port: config.REDIS_PORT, database: config.REDIS_DB, ...auth }
}
