import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { HttpError, frameworkErrorHandler, registerErrorHandling } from '@repo/http-errors'
import { AccessLog } from '@repo/service-kit'
import type { ItemsListConfig } from './config.ts'
import { StoreUnavailableError, type ItemStore } from './item-store.ts'
import { healthRoutes } from './routes/health.ts'
import { itemRoutes } from './routes/items.ts'
import { rootRoutes } from './routes/root.ts'

export type AppConfig = Pick<ItemsListConfig, 'CORS_ORIGINS'>

export interface AppDependencies {
  store: ItemStore
  /** The process logger (`server.ts` creates it); no logging when omitted. */
  logger?: FastifyBaseLogger
}

const errorBody = (detail: string) => ({ detail })

const BODY_LIMIT_BYTES = 16 * 1024
/** A 1024-character name, percent-encoded at up to 12 characters per code point, must still route. */
const MAX_PARAM_LENGTH = 1024 * 12

/** Builds the items-list application around `store`. Never listens: `server.ts` does. */
export async function buildApp(config: AppConfig, deps: AppDependencies): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    logController: new AccessLog(),
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

  if (config.CORS_ORIGINS) {
    await app.register(cors, {
      origin: config.CORS_ORIGINS.includes('*') ? '*' : config.CORS_ORIGINS,
      // @fastify/cors allows only GET, HEAD and POST unless told otherwise.
      methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    })
  }

  await app.register(swagger, {
    openapi: {
      info: { title: 'items-list', version: '1.0.0', description: 'An ordered list of item names kept in Redis.' },
    },
  })
  await app.register(swaggerUi, { routePrefix: '/docs' })

  await app.register(rootRoutes)
  await app.register(healthRoutes, { store: deps.store })
  await app.register(itemRoutes, { store: deps.store })

  return app
}
