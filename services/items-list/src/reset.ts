import { setTimeout as sleep } from 'node:timers/promises'
import { loadConfig } from '@repo/config'
import { createLogger, createRedisConnection } from '@repo/service-kit'
import { ItemsListConfig } from './config.ts'
import { createItemStore } from './store/item-store.ts'
import { ITEM_STORE_SCRIPTS } from './store/scripts.ts'
import { redisTarget } from './store/plugin.ts'

// Empties the list at ITEMS_KEY on the Redis the service's own variables name (docs/list.md,
// "Emptying the list"): `node dist/reset.js --yes` in a replica's container, so that it reaches
// Redis as the service does, TLS, ACL user and Sentinel included. Exits 0 once the list is empty,
// 1 when Redis could not be reached or refused, 2 without `--yes`.

/** How long to wait for Redis before giving up: the connection is made in the background. */
const CONNECT_WAIT_MS = 5_000

const log = createLogger('info', process.stdout)
if (!process.argv.includes('--yes')) {
  log.error('this empties the list at ITEMS_KEY for good: run it again with --yes')
  process.exit(2)
}

const config = loadConfig(ItemsListConfig, process.env)
const connection = createRedisConnection({ target: redisTarget(config), scripts: ITEM_STORE_SCRIPTS, logger: log, purpose: 'list reset', deadlineMs: config.REDIS_DEADLINE_MS })
const store = createItemStore(connection, { key: config.ITEMS_KEY, maxCount: config.ITEMS_MAX_COUNT, idempotencyTtlSeconds: config.IDEMPOTENCY_TTL_SECONDS })
for (const started = performance.now(); !connection.isAvailable && performance.now() - started < CONNECT_WAIT_MS; ) await sleep(50)
try {
  const chunks = await store.reset()
  log.info({ key: config.ITEMS_KEY, chunks }, 'the list is empty: a new list took its place, and its old chunks are deleted')
} catch (error) {
  log.error({ err: error, key: config.ITEMS_KEY }, 'the list was not reset')
  process.exitCode = 1
} finally {
  await connection.close()
}
