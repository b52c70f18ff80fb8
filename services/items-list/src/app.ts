// `buildApp`: items-list as one Fastify plugin tree (the store, the service kit, the routes), the
// same for production and the tests, with the store's failures answered 503.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { HttpError } from '@repo/http-errors'
import { createServer, RedisUnavailableError, serviceKit } from '@repo/service-kit'
import type { ItemsListConfig } from './config.ts'
import { rootRoutes } from './http/root.ts'
import { healthRoutes } from './http/health.ts'
import { itemRoutes } from './http/items.ts'
import { eventRoutes } from './http/events.ts'
import { DeleteInterruptedError, InconsistentListError } from './store/item-store.ts'
import { itemStore } from './store/plugin.ts'

const errorBody = (detail: string) => ({ detail })

const BODY_LIMIT_BYTES = 16 * 1024
/**
 * The router measures a parameter after percent-decoding, in UTF-16 code units: a 1024-character
 * name of astral characters (emoji) is 2048 units. Twice that, so that a name somewhat too long
 * still reaches the schema and is answered 422, not 404.
 */
const MAX_PARAM_LENGTH = 1024 * 2 * 2

/**
 * A Redis that is down, refuses or misses its deadline is the store's failure, not the caller's;
 * so are keys that disagree, and a delete whose outcome is unknown (a retry answers it).
 */
function mapStoreFailure(error: unknown): HttpError | undefined {
  if (error instanceof InconsistentListError) return new HttpError(503, { detail: `Item store inconsistent: ${error.message}` }, { cause: error })
  if (error instanceof DeleteInterruptedError) return new HttpError(503, { detail: 'The delete was interrupted and its outcome is unknown: retry it' }, { cause: error })
  if (!(error instanceof RedisUnavailableError)) return undefined
  return new HttpError(503, { detail: 'Item store unavailable' }, { cause: error })
}

/**
 * The whole items-list service from its validated configuration. It registers, in this order:
 * `itemStore` (the Redis connection, direct or through `REDIS_SENTINELS`, the
 * store and its metrics, the background move of an earlier list into chunks), `serviceKit` (the
 * server span when tracing runs, request ids, security headers, the Host check, CORS, the rate
 * limit counting in the store's Redis, the error shape, JSON bodies, OpenAPI, `/metrics`, the
 * drain), then the routes: root, health, items. The store's connection is closed with the app.
 * Production (`server.ts`) and the tests build it with this one function. Never listens.
 */
export async function buildApp(config: ItemsListConfig, { logger }: { logger: FastifyBaseLogger }): Promise<FastifyInstance> {
  const app = createServer({
    logger,
    errorBody,
    trustProxy: config.TRUST_PROXY,
    fastify: { bodyLimit: BODY_LIMIT_BYTES, routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH } },
  })
  // Bodies are JSON or nothing: anything else (text/plain included) is 415.
  app.removeContentTypeParser('text/plain')

  // Opened before the shared set-up, which counts each client's requests in the store's Redis.
  await app.register(itemStore, { config })
  await app.register(serviceKit, {
    openapi: { title: 'items-list', version: '1.0.0', description: 'An ordered list of item names kept in Redis.' },
    errors: { errorBody, validationStatus: 422, mapError: mapStoreFailure },
    cors: { origins: config.CORS_ORIGINS, methods: ['GET', 'HEAD', 'POST', 'DELETE'], exposedHeaders: ['Link', 'Idempotent-Replayed', 'ETag'] },
    // Counted in the store's Redis, so that replicas share each client's count.
    rateLimit: { perMinute: config.RATE_LIMIT_PER_MINUTE, redis: app.itemStoreRedis },
  })

  await app.register(rootRoutes)
  await app.register(healthRoutes)
  await app.register(itemRoutes, { maxCount: config.ITEMS_MAX_COUNT })
  await app.register(eventRoutes, { maxStreams: config.ITEMS_EVENTS_MAX_STREAMS, bufferBytes: config.ITEMS_EVENTS_BUFFER_BYTES })
  return app
}
