import type { Test } from 'tap'
import { createClient } from 'redis'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { captureLogs, eventually, startPrivateRedis, type CapturedLogs, type PrivateRedis } from '@repo/test-support'
import { buildApp } from '../../src/app.ts'
import { ItemsListConfig } from '../../src/config.ts'

/** The list's key under the default configuration. */
export const ITEMS_KEY = 'items'

export interface ServiceUnderTest {
  /** The app exactly as `server.ts` builds it: `buildApp(loadConfig(...), { logger: createLogger(...) })`. */
  app: FastifyInstance
  config: ItemsListConfig
  redis: PrivateRedis
  /** A plain client on the same Redis, to look at what the service stored. */
  inspector: Inspector
  /** Every log line, at trace level. */
  logs: CapturedLogs
  /** The list as Redis holds it. */
  storedItems: () => Promise<string[]>
  /** Resolves once `/ready` answers 200 (Redis answers the app again); rejects after about 5 s. */
  untilReady: () => Promise<void>
}

export interface BuildOptions {
  /** Environment variables on top of the private Redis's REDIS_HOST and REDIS_PORT. */
  env?: Record<string, string>
  /** A Redis of the test's (another app's, or one not started yet); else a new one for this app. */
  redis?: PrivateRedis
  /** Whether to wait for the app to reach Redis before returning; true unless Redis is not started. */
  ready?: boolean
}

/**
 * The service as production builds it, through `buildApp` and nothing else: its configuration
 * read by `loadConfig` from environment variables (so every default is the schema's), a private
 * redis-server for this app (or `options.redis`), and the service's own logger at trace level,
 * recorded. The list is emptied before each test; the app, the inspector and the Redis this
 * helper started are closed at the end.
 */
export async function buildService(t: Test, options: BuildOptions = {}): Promise<ServiceUnderTest> {
  const redis = options.redis ?? (await startPrivateRedis())
  const config = loadConfig(ItemsListConfig, { REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port), ...options.env })
  const logs = captureLogs()
  const app = await buildApp(config, { logger: createLogger('trace', logs.destination) })
  const inspector = createInspector(config)
  t.teardown(async () => {
    await app.close()
    inspector.destroy()
    if (!options.redis) await redis.dispose()
  })

  const untilReady = async () => {
    const ready = await eventually(async () => (await app.inject({ method: 'GET', url: '/ready' })).statusCode === 200)
    if (!ready) throw new Error('the app never reached its Redis')
  }
  if (options.ready ?? true) {
    await inspector.connect()
    await untilReady()
  } else {
    // Redis is not up yet: the inspector's commands wait in its queue until it is.
    inspector.connect().catch(() => {})
  }
  t.beforeEach(async () => {
    await inspector.del(config.ITEMS_KEY)
  })

  return { app, config, redis, inspector, logs, storedItems: () => inspector.lRange(config.ITEMS_KEY, 0, -1), untilReady }
}

export type Inspector = ReturnType<typeof createInspector>

/**
 * A plain node-redis client, to look at what the service stored: on the Redis and database the
 * service's configuration names, with its credentials; or on a private Redis's port, database 0.
 */
export function createInspector(target: number | Pick<ItemsListConfig, 'REDIS_URL' | 'REDIS_HOST' | 'REDIS_PORT' | 'REDIS_USERNAME' | 'REDIS_PASSWORD' | 'REDIS_DB'>) {
  const socket = { reconnectStrategy: 50 }
  const credentials = (config: Pick<ItemsListConfig, 'REDIS_USERNAME' | 'REDIS_PASSWORD'>) => ({
    ...(config.REDIS_USERNAME === undefined ? {} : { username: config.REDIS_USERNAME }),
    ...(config.REDIS_PASSWORD === undefined ? {} : { password: config.REDIS_PASSWORD }),
  })
  const options =
    typeof target === 'number'
      ? { socket: { ...socket, host: '127.0.0.1', port: target } }
      : target.REDIS_URL !== undefined
        ? { url: target.REDIS_URL, socket, ...credentials(target) }
        : { socket: { ...socket, host: target.REDIS_HOST, port: target.REDIS_PORT }, ...credentials(target), database: target.REDIS_DB }
  const inspector = createClient(options)
  inspector.on('error', () => {})
  return inspector
}

/** A plain client on a private Redis's port (database 0), connected. */
export async function connectInspector(port: number): Promise<Inspector> {
  const inspector = createInspector(port)
  await inspector.connect()
  return inspector
}
