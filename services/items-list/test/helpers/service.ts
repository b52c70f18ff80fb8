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
  /** The list as Redis holds it, read from its layout with plain commands (not the service's reads). */
  storedItems: () => Promise<string[]>
  /** Resolves once `/ready` answers 200 (Redis answers the app again); rejects after about 5 s. */
  untilReady: () => Promise<void>
}

export interface BuildOptions {
  /** Environment variables on top of the private Redis's REDIS_HOST and REDIS_PORT. */
  env?: Record<string, string>
  /** A Redis of the test's (another app's, or one not started yet); else a new one for this app. */
  redis?: PrivateRedis
  /**
   * Whether the private Redis fsyncs every write, as production's does: for tests of what survives
   * a crash. Otherwise not: a durable Redis goes at its disk's pace, and on a machine whose other
   * jobs share the disk, a burst of appends waits behind fsyncs past the Redis deadline
   * (docs/testing.md, *A busy machine*).
   */
  durable?: boolean
  /** Whether to wait for the app to reach Redis before returning; true unless Redis is not started. */
  ready?: boolean
}

/**
 * The service as production builds it, through `buildApp` and nothing else: its configuration
 * read by `loadConfig` from environment variables (so every default is the schema's), a private
 * redis-server without persistence for this app (or `options.redis`), and the service's own
 * logger at trace level, recorded. The list is emptied before each test; the app, the inspector and the Redis this
 * helper started are closed at the end.
 */
export async function buildService(t: Test, options: BuildOptions = {}): Promise<ServiceUnderTest> {
  const redis = options.redis ?? (await startPrivateRedis({ durable: options.durable ?? false }))
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
    // The app makes the list's layout at start-up, in the background: done, it moves nothing
    // more, and a list the test writes as an earlier version did stays as written until the app
    // next touches it.
    await untilLayout(inspector, config.ITEMS_KEY)
  } else {
    // Redis is not up yet: the inspector's commands wait in its queue until it is.
    inspector.connect().catch(() => {})
  }
  t.beforeEach(async () => {
    await clearList(inspector, config.ITEMS_KEY)
  })

  return { app, config, redis, inspector, logs, storedItems: () => storedList(inspector, config.ITEMS_KEY), untilReady }
}

/** Deletes the list at `key` whatever its layout: its index, chunks, header and records. */
export async function clearList(inspector: Inspector, key: string): Promise<void> {
  const keys = await inspector.keys(`${key}*`)
  if (keys.length > 0) await inspector.del(keys)
}

/**
 * The names of the list at `key`, in order: from its chunks (in the order of its index, without
 * the tombstones of deleted names) and the part an earlier version's list has not yet moved in;
 * or, before the service has first touched it, from the plain list an earlier version wrote. Read
 * in one script, so that a step of the service's move between two reads cannot tear the answer.
 */
export async function storedList(inspector: Pick<Inspector, 'eval'>, key: string): Promise<string[]> {
  return (await inspector.eval(STORED_LIST, { keys: [key, `${key}:legacy`] })) as string[]
}

const STORED_LIST = `#!lua flags=no-writes
local key, legacy = KEYS[1], KEYS[2]
if redis.call('TYPE', key).ok == 'list' then return redis.call('LRANGE', key, 0, -1) end
local names = {}
for _, member in ipairs(redis.call('ZRANGE', key, '-inf', '+inf', 'BYSCORE')) do
  local part = string.match(member, '^%d+$') and (key .. ':chunk:' .. member) or (member == 'legacy' and legacy)
  if part then
    for _, name in ipairs(redis.call('LRANGE', part, 0, -1)) do
      if name ~= '' then names[#names + 1] = name end
    end
  end
end
return names`

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

/** The `index`th of a test's names: 16 bytes, in list order when sorted. */
export const nameAt = (index: number): string => `s-${String(index).padStart(14, '0')}`

/**
 * Writes `count` names (`nameAt(from)` on) at the end of the list at `key` as an earlier version
 * kept it: one plain Redis list, `RPUSH`, a thousand names a command, all sent at once.
 */
export async function writeEarlierList(inspector: Inspector, key: string, count: number, from = 0): Promise<void> {
  const pushes: Promise<number>[] = []
  for (let start = from; start < from + count; start += 1000) {
    pushes.push(inspector.rPush(key, Array.from({ length: Math.min(1000, from + count - start) }, (_, index) => nameAt(start + index))))
  }
  await Promise.all(pushes)
}

/** Resolves once the app has made the layout of the list at `key` (the index exists). */
async function untilLayout(inspector: Inspector, key: string): Promise<void> {
  if (!(await eventually(async () => (await inspector.type(key)) === 'zset'))) throw new Error(`the app never made the list's layout at ${key}`)
}

/** Resolves once the list at `key` is all in chunks: its index there, nothing left to move in. */
export async function untilMigrated(inspector: Inspector, key: string): Promise<void> {
  const migrated = await eventually(async () => (await inspector.type(key)) === 'zset' && (await inspector.exists(`${key}:legacy`)) === 0, 400)
  if (!migrated) throw new Error(`the list at ${key} was never moved into chunks`)
}

/** Every list route's status (POST, POST with a key, GET, GET a page, DELETE, /ready), and the POST's and /ready's answers. */
export async function listAnswers(app: FastifyInstance) {
  const post = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'new' } })
  const once = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'new' }, headers: { 'idempotency-key': 'k1' } })
  const list = await app.inject({ method: 'GET', url: '/items/' })
  const page = await app.inject({ method: 'GET', url: '/items/?limit=1' })
  const remove = await app.inject({ method: 'DELETE', url: `/items/${nameAt(0)}` })
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  return { statuses: [post, once, list, page, remove, ready].map((res) => res.statusCode), post: post.json<{ detail: string }>(), ready: ready.json<{ detail: string }>() }
}

/** Appends `count` names through the app's store, `name(index)` each, a hundred at a time. */
export async function appendMany(app: FastifyInstance, count: number, name: (index: number) => string): Promise<void> {
  for (let first = 0; first < count; first += 100) {
    await Promise.all(Array.from({ length: Math.min(100, count - first) }, (_, offset) => app.itemStore.append(name(first + offset))))
  }
}
