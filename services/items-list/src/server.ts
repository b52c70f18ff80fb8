import closeWithGrace from 'close-with-grace'
import { pino } from 'pino'
import { loadConfig } from '@repo/config'
import { describeError } from '@repo/http-errors'
import { buildApp } from './app.ts'
import { ItemsListConfig } from './config.ts'
import { createRedisItemStore } from './item-store.ts'

/** Inside the 10 s an orchestrator waits between SIGTERM and SIGKILL. */
const SHUTDOWN_DEADLINE_MS = 8_000

const config = readConfig()

const logger = pino({ level: config.LOG_LEVEL }, )
const store = createRedisItemStore({
  host: config.REDIS_HOST,
  port: config.REDIS_PORT,
  password: config.REDIS_PASSWORD,
  database: config.REDIS_DB,
  key: config.ITEMS_KEY,
  logger,
})
const app = await buildApp(config, { store, logger })

closeWithGrace({ delay: SHUTDOWN_DEADLINE_MS, logger }, async ({ signal, err }) => {
  if (err) logger.error({ error: describeError(err) }, 'shutting down after an uncaught error')
  else logger.info({ signal }, 'shutting down')
  // Stop accepting, let in-flight requests finish, then close Redis: in that order.
  await app.close()
  await store.close()
})

await app.listen({ host: config.HOST, port: config.PORT })

/** The configuration, or exit 1 with one line per bad variable (and no stack trace). */
function readConfig(): ItemsListConfig {
  try {
    return loadConfig(ItemsListConfig, process.env)
  } catch (error) {
    console.error((error as Error).message)
    process.exit(1)
  }
}
