import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { Registry } from 'prom-client'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { HttpError, frameworkErrorHandler, registerErrorHandling } from '@repo/http-errors'
import { AccessLog, registerHttpSetup, serverOptions, type RateLimitRedis } from '@repo/service-kit'
import type { ItemsListConfig } from './config.ts'
import { StoreUnavailableError, type ItemStore } from './item-store.ts'
import { healthRoutes } from './routes/health.ts'
import { itemRoutes } from './routes/items.ts'
import { rootRoutes } from './routes/root.ts'

export type AppConfig = Pick<ItemsListConfig, 'CORS_ORIGINS' | 'TRUST_PROXY'> & Partial<Pick<ItemsListConfig, 'RATE_LIMIT_PER_MINUTE'>>

export interface AppDependencies {
  store: ItemStore
  /** The process logger (`server.ts` creates it); no logging when omitted. */
  logger?: FastifyBaseLogger
  /** The registry `/metrics` serves; a new one when omitted (never prom-client's global one). */
  metrics?: Registry
  /** Where the rate limit counts, shared by replicas: the store's Redis. In the process when omitted. */
  rateLimitRedis?: RateLimitRedis
}

const errorBody = (detail: string) => ({ detail })

const BODY_LIMIT_BYTES = 16 * 1024
/**
 * The router measures a parameter after percent-decoding, in UTF-16 code units: a 1024-character
 * name of astral characters (emoji) is 2048 units. Twice that, so that a name somewhat too long
 * still reaches the schema and is answered 422, not 404.
 */
const MAX_PARAM_LENGTH = 1024 * 2 * 2

/** Builds the items-list application around `store`. Never listens: `server.ts` does. */
export async function buildApp(config: AppConfig, deps: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    logController: new AccessLog(),
    ...serverOptions(config),
    bodyLimit: BODY_LIMIT_BYTES,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Names are strings: {"name": 123} is an error, not "123".
    ajv: { customOptions: { coerceTypes: false } },
    frameworkErrors: frameworkErrorHandler({ errorBody }),
  }).withTypeProvider<TypeBoxTypeProvider>()

  // Bodies are JSON or nothing: anything else (text/plain included) is 415.
  app.removeContentTypeParser('text/plain')
  registerErrorHandling(app, {
    errorBody,
    validationStatus: 422,
    mapError: (error) =>
      error instanceof StoreUnavailableError
        ? new HttpError(503, { detail: 'Item store unavailable' }, { cause: error })
        : undefined,
  })

  await registerHttpSetup(app, {
    openapi: { title: 'items-list', version: '1.0.0', description: 'An ordered list of item names kept in Redis.' },
    errorBody,
    corsOrigins: config.CORS_ORIGINS,
    corsMethods: ['GET', 'HEAD', 'POST', 'DELETE'],
    metrics: deps.metrics ?? new Registry(),
    rateLimitPerMinute: config.RATE_LIMIT_PER_MINUTE,
    redis: deps.rateLimitRedis,
  })

  await app.register(rootRoutes)
  await app.register(healthRoutes, { store: deps.store })
  await app.register(itemRoutes, { store: deps.store })

  return app
}
