import fp from 'fastify-plugin'
import { redisSentinels } from '@repo/config'
import { createRedisConnection, type RedisConnection, type RedisTarget } from '@repo/service-kit'
import type { ForgeAggregatorConfig } from '../config.ts'
import type { UpstreamCredentials } from '../upstream-credentials.ts'
import { createProductionLock, type ProductionLock } from '../shared-cache/production-lock.ts'
import { createSharedStore, namespaceFor, type SharedStore } from '../shared-cache/shared-store.ts'

/** What replicas share through `REDIS_URL` or `REDIS_SENTINELS` (DESIGN §7). */
export interface SharedCache {
  /** The one Redis connection (the rate limit counts on its client too). */
  connection: RedisConnection
  /** Answers, held bodies and the budget. */
  store: SharedStore
  /** One production of an answer for every replica. */
  lock: ProductionLock
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Present only with `REDIS_URL` or `REDIS_SENTINELS`: without them, everything stays in this process. */
    sharedCache: SharedCache | undefined
  }
}

export interface SharedStorePluginOptions {
  config: Pick<
    ForgeAggregatorConfig,
    | 'REDIS_URL'
    | 'REDIS_SENTINELS'
    | 'REDIS_SENTINEL_NAME'
    | 'REDIS_USERNAME'
    | 'REDIS_PASSWORD'
    | 'REDIS_CA_FILE'
    | 'FORGE_API_URL'
    | 'FORGE_FOLLOWERS_LIMIT'
    | 'FORGE_MAX_REPO_PAGES'
    | 'FORGE_TIMEOUT_MS'
  >
  /** Whom the upstream answers: part of the namespace. */
  credentials: UpstreamCredentials
}

/** How often a Redis set aside, or one a waiter depends on, is asked whether it answers again. */
const PROBE_INTERVAL_MS = 250

/**
 * With `REDIS_URL` or `REDIS_SENTINELS` (not both: a `ConfigError`): one resilient Redis
 * connection (`forge_shared_store_up`), the shared store on it under this deployment's namespace,
 * and the production lock; closed with the app. Without either, `app.sharedCache` is undefined.
 */
export const sharedStore = fp<SharedStorePluginOptions>(
  async (app, { config, credentials }) => {
    const sentinels = redisSentinels(config)
    const target: RedisTarget | undefined = sentinels ?? (config.REDIS_URL === undefined ? undefined : { url: config.REDIS_URL })
    if (!target) {
      app.decorate('sharedCache', undefined)
      return
    }
    const namespace = namespaceFor(config, credentials)
    const connection = createRedisConnection({
      target: { ...target, username: config.REDIS_USERNAME, password: config.REDIS_PASSWORD, caFile: config.REDIS_CA_FILE },
      logger: app.log,
      purpose: 'shared cache',
      probeIntervalMs: PROBE_INTERVAL_MS,
      up: { registry: app.metrics, name: 'forge_shared_store_up', help: '1 while the shared cache’s Redis answers, else 0' },
    })
    const lock = createProductionLock({ connection, namespace, waitMs: config.FORGE_TIMEOUT_MS, probeIntervalMs: PROBE_INTERVAL_MS, logger: app.log })
    app.decorate('sharedCache', { connection, store: createSharedStore(connection, namespace, app.metrics), lock })
    app.addHook('onClose', async () => {
      // Before the connection closes: the releases go out on it.
      await lock.close()
      await connection.close()
    })
  },
  { name: 'shared-store', fastify: '5.x' },
)
