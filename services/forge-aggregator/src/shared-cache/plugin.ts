import { createHash } from 'node:crypto'
import fp from 'fastify-plugin'
import { redisSentinels } from '@repo/config'
import { createRedisConnection, type RedisConnection, type RedisTarget } from '@repo/service-kit'
import type { ForgeAggregatorConfig } from '../config.ts'
import { createProductionLock, type ProductionLock } from './lock.ts'
import { createSharedStore, type SharedStore } from './store.ts'
import { STORE_FORMAT_VERSION } from './stored.ts'

/**
 * The shared-cache plugin: with `REDIS_URL` or `REDIS_SENTINELS`, the Redis connection, the shared
 * store and the production lock, under this deployment's namespace.
 */

/** What replicas share through `REDIS_URL` or `REDIS_SENTINELS` (docs/design.md, "Sharing across replicas"). */
export interface SharedCache {
  /** The one Redis connection (the rate limit counts on its client too). */
  connection: RedisConnection
  /** Answers, held projections and the budget. */
  store: SharedStore
  /** One production of an answer for every replica. */
  lock: ProductionLock
  /**
   * This deployment's Redis key or channel for `name` (under `namespaceFor`), for what keeps keys
   * of its own (webhook deliveries and drops); answers go through `store`, never through this.
   */
  keyFor(name: string): string
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Present only with `REDIS_URL` or `REDIS_SENTINELS`: without them, everything stays in this process. */
    sharedCache: SharedCache | undefined
  }
}

type NamespaceSettings = Pick<ForgeAggregatorConfig, 'FORGE_API_URL' | 'FORGE_FOLLOWERS_LIMIT' | 'FORGE_MAX_REPO_PAGES'>

export interface SharedCachePluginOptions {
  config: NamespaceSettings &
    Pick<ForgeAggregatorConfig, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_USERNAME' | 'REDIS_PASSWORD' | 'REDIS_CA_FILE' | 'REDIS_DEADLINE_MS' | 'FORGE_TIMEOUT_MS'>
  /** Whom the upstream answers (`callerOf`): part of the namespace. */
  caller: string | null
}

/** How often a Redis set aside, or one a waiter depends on, is asked whether it answers again. */
const PROBE_INTERVAL_MS = 250

/**
 * The key prefix of one deployment: the stored format's version, then a hash of what decides
 * its answers (the API URL, the caller, the settings that shape an answer), so that deployments
 * sharing one Redis never see each other's answers, and versions of the service storing
 * different shapes never read each other's entries. The caller (a token) goes into the hash only.
 */
export function namespaceFor(config: NamespaceSettings, caller: string | null): string {
  const settings = [config.FORGE_API_URL, caller, config.FORGE_FOLLOWERS_LIMIT, config.FORGE_MAX_REPO_PAGES]
  return `forge:${STORE_FORMAT_VERSION}:${createHash('sha256').update(JSON.stringify(settings)).digest('base64url').slice(0, 16)}:`
}

/**
 * With `REDIS_URL` or `REDIS_SENTINELS` (not both: a `ConfigError`): one resilient Redis
 * connection (`forge_shared_store_up`), the shared store on it under this deployment's namespace,
 * and the production lock; closed with the app. Without either, `app.sharedCache` is undefined.
 */
export const sharedCache = fp<SharedCachePluginOptions>(
  async (app, { config, caller }) => {
    const sentinels = redisSentinels(config)
    const target: RedisTarget | undefined = sentinels ?? (config.REDIS_URL === undefined ? undefined : { url: config.REDIS_URL })
    if (!target) {
      app.decorate('sharedCache', undefined)
      return
    }
    const namespace = namespaceFor(config, caller)
    const connection = createRedisConnection({
      target: { ...target, username: config.REDIS_USERNAME, password: config.REDIS_PASSWORD, caFile: config.REDIS_CA_FILE },
      logger: app.log,
      purpose: 'shared cache',
      deadlineMs: config.REDIS_DEADLINE_MS,
      probeIntervalMs: PROBE_INTERVAL_MS,
      up: { registry: app.metrics, name: 'forge_shared_store_up', help: '1 while the shared cache’s Redis answers, else 0' },
    })
    const lock = createProductionLock({ connection, namespace, waitMs: config.FORGE_TIMEOUT_MS, probeIntervalMs: PROBE_INTERVAL_MS, logger: app.log })
    app.decorate('sharedCache', { connection, store: createSharedStore(connection, namespace, app.metrics), lock, keyFor: (name: string) => namespace + name })
    app.addHook('onClose', async () => {
      // Before the connection closes: the releases go out on it.
      await lock.close()
      await connection.close()
    })
  },
  { name: 'shared-cache', fastify: '5.x' },
)
