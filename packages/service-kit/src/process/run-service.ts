// `runService`: a service's whole process around its app (configuration, logs, tracing, listening,
// the drain and shutdown), so that each service's `server.ts` is one call.
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import type { Static, TObject } from '@sinclair/typebox'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { ConfigError, loadConfig } from '@repo/config'
import { stdoutInBatches } from '../logging/destination.ts'
import { createLogger } from '../logging/logger.ts'
import { startTracing } from '../tracing/tracing.ts'

/**
 * Counted from the end of the drain's delay. With no delay, it stays inside the 10 s Docker waits
 * between SIGTERM and SIGKILL by default; with one, the grace period must cover both (docs/shutdown.md, *Grace periods and the delay*).
 */
const SHUTDOWN_DEADLINE_MS = 8_000

/** What every service's configuration holds (see `serverSettings`). */
interface ServerConfig {
  HOST: string
  PORT: number
  LOG_LEVEL: string
  SHUTDOWN_DELAY_SECONDS: number
}

export interface ServiceDefinition<Schema extends TObject> {
  /** The service's name: its traces' `service.name` unless `OTEL_SERVICE_NAME` says otherwise. */
  name: string
  /** The service's configuration schema; it must include `serverSettings()`. */
  config: Schema
  /** The process environment: read here and nowhere else. */
  env: NodeJS.ProcessEnv
  /**
   * The service's `buildApp`: the whole app from its configuration, dependencies opened in its
   * plugins and closed in their `onClose` hooks. Not yet listening. A `ConfigError` it throws
   * (a rule across variables the schema cannot state) ends the start as an invalid variable does.
   * Called once tracing, when asked for, has started: import the app's modules here (a dynamic
   * `import()`), not at the top of `server.ts`, so that tracing can instrument the Redis client.
   */
  start(config: Readonly<Static<Schema>>, options: { logger: FastifyBaseLogger }): Promise<FastifyInstance>
}

/**
 * Runs a service as its `server.ts` entry point: validates the configuration (an invalid one
 * exits 1 with one line per bad variable), logs JSON lines to stdout, builds the app, listens,
 * and on SIGTERM or SIGINT drains (docs/shutdown.md, *The rule*): `/ready` answers 503
 * at once and every answer closes its connection for `SHUTDOWN_DELAY_SECONDS`, so that balancers
 * take the replica out while it still serves; then it closes the app (no new connections, in-flight requests finish,
 * then its plugins close what they opened) and exits 0, or 1 past the delay plus 8 s. An uncaught
 * error closes at once, without the delay, and exits 1.
 * When the `OTEL_*` variables ask for traces, tracing starts before the app is built and its last
 * spans are exported after the app has closed.
 * Log lines go to stdout in batches (`stdoutInBatches`).
 */
export async function runService<Schema extends TObject>(service: ServiceDefinition<Schema>): Promise<void> {
  const config = readConfig(service)
  const tracing = await startTracing({ serviceName: service.name, env: service.env })
  const logger = createLogger(config.LOG_LEVEL, stdoutInBatches())
  const app = await service.start(config, { logger }).catch(exitOnConfigError)

  const delayMs = config.SHUTDOWN_DELAY_SECONDS * 1000
  closeWithGrace({ delay: delayMs + SHUTDOWN_DEADLINE_MS, logger }, async ({ signal, err }) => {
    if (err) {
      logger.error({ err }, 'shutting down after an uncaught error')
    } else {
      app.startDraining()
      logger.info({ signal, delaySeconds: config.SHUTDOWN_DELAY_SECONDS }, 'shutting down')
      await sleep(delayMs)
      logger.info('drained: closing')
    }
    await app.close()
    await tracing?.shutdown()
  })

  await app.listen({ host: config.HOST, port: config.PORT })
}

function readConfig<Schema extends TObject>(service: ServiceDefinition<Schema>): Readonly<Static<Schema>> & ServerConfig {
  try {
    return loadConfig(service.config, service.env) as Readonly<Static<Schema>> & ServerConfig
  } catch (error) {
    return exitOnConfigError(error)
  }
}

/** Exits 1 with one line per bad variable (never a value, never a stack); any other error goes on. */
function exitOnConfigError(error: unknown): never {
  if (!(error instanceof ConfigError)) throw error
  console.error(error.message)
  process.exit(1)
}
