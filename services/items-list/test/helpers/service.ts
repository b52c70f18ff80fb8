import type { Test } from 'tap'
import { createClient } from 'redis'
import { pino } from 'pino'
import { Registry } from 'prom-client'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppConfig, type AppDependencies } from '../../src/app.ts'
import { createRedisItemStore, type ItemStore } from '../../src/item-store.ts'
import { startPrivateRedis, type PrivateRedis } from '@repo/test-support'

export const ITEMS_KEY = 'items'

export interface TestContext {
  app: FastifyInstance
  store: ReturnType<typeof createRedisItemStore>
  redis: PrivateRedis
  /** A separate connection for looking at the list directly. */
  inspector: Inspector
  /** The list as Redis holds it. */
  storedItems: () => Promise<string[]>
}

/**
 * The production app on the production store, against a private redis-server for this test
 * file; the list is emptied before each test and everything is closed at the end.
 */
export async function buildWithRedis(
  t: Test,
  config: AppConfig = {},
  deps: Omit<AppDependencies, 'store'> = {},
): Promise<TestContext> {
  const redis = await startPrivateRedis()
  const metrics = deps.metrics ?? new Registry()
  const store = createRedisItemStore({ host: '127.0.0.1', port: redis.port, database: 0, key: ITEMS_KEY, logger: silentLogger, metrics })
  const app = await buildApp(config, { store, rateLimitRedis: store.redis, ...deps, metrics })
  const inspector = await connectInspector(redis.port)
  await waitUntilReady(store)

  t.beforeEach(async () => {
    await inspector.del(ITEMS_KEY)
  })
  t.teardown(async () => {
    await app.close()
    await store.close()
    inspector.destroy()
    await redis.dispose()
  })
  return { app, store, redis, inspector, storedItems: () => inspector.lRange(ITEMS_KEY, 0, -1) }
}

export type Inspector = Awaited<ReturnType<typeof connectInspector>>

/** A plain client on a private Redis, to look at what the service stored. */
export async function connectInspector(port: number) {
  const inspector = createClient({ socket: { port, host: '127.0.0.1', reconnectStrategy: 50 } })
  inspector.on('error', () => {})
  await inspector.connect()
  return inspector
}

export async function waitUntilReady(store: ItemStore): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      await store.ping()
      return
    } catch {
      await sleep(50)
    }
  }
  throw new Error('the store never became ready')
}

/** The store logs outages; tests that provoke them on purpose need not see them. */
export const silentLogger = pino({ level: 'silent' })
