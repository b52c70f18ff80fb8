import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { Registry } from 'prom-client'
import type { FastifyInstance } from 'fastify'
import { registerMetrics } from './metrics.ts'
import { registerRateLimit, type RateLimitRedis } from './rate-limit.ts'
import { echoRequestId } from './request-id.ts'
import { addSecurityHeaders } from './security-headers.ts'

export interface HttpSetupOptions {
  /** The OpenAPI document's `info`. */
  openapi: { title: string; version: string; description: string }
  /** The service's error body for a message (for the 429 of the rate limit). */
  errorBody: (message: string) => Record<string, unknown>
  /** `CORS_ORIGINS`: no CORS headers when unset. */
  corsOrigins?: readonly string[] | undefined
  /** The methods a browser may use across origins. */
  corsMethods: string[]
  /** The app's own registry: served at `/metrics`. */
  metrics: Registry
  /** `RATE_LIMIT_PER_MINUTE`: 0 or unset, no limit. */
  rateLimitPerMinute?: number | undefined
  /** Where the rate limit counts when the service has a Redis; in the process otherwise. */
  redis?: RateLimitRedis | undefined
}

/** Response headers a browser script on another origin may read. */
const EXPOSED_HEADERS = ['ETag', 'Retry-After', 'X-Forge-Partial', 'Cache-Status', 'Age', 'X-Request-Id']

/**
 * What both services set up the same way, before their routes: the request id sent back,
 * security headers, CORS, the rate limit, the OpenAPI document and Swagger UI at `/docs`, and
 * `/metrics` with the HTTP histogram. The Fastify options that go with it are `serverOptions`.
 */
export async function registerHttpSetup(app: FastifyInstance, options: HttpSetupOptions): Promise<void> {
  echoRequestId(app)
  addSecurityHeaders(app)

  const origins = options.corsOrigins
  if (origins) {
    await app.register(cors, {
      origin: origins.includes('*') ? '*' : [...origins],
      // @fastify/cors allows only GET, HEAD and POST unless told otherwise.
      methods: options.corsMethods,
      exposedHeaders: EXPOSED_HEADERS,
    })
  }

  if (options.rateLimitPerMinute) {
    await registerRateLimit(app, {
      perMinute: options.rateLimitPerMinute,
      errorBody: options.errorBody,
      redis: options.redis,
      service: options.openapi.title,
    })
  }

  await app.register(swagger, {
    openapi: { info: options.openapi },
    // Registered with `openapi`, the document is always OpenAPI 3.
    transformObject: (document) => declareRequestIdHeader((document as { openapiObject: object }).openapiObject),
  })
  await app.register(swaggerUi, { routePrefix: '/docs' })

  registerMetrics(app, options.metrics)
}

type OpenApiPaths = Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>>

/** Every answer carries `X-Request-Id`: declared once here rather than in every route's schema. */
function declareRequestIdHeader<Document extends object>(document: Document): Document {
  const header = { description: "the caller's X-Request-Id when well-formed, else a new UUID", schema: { type: 'string' } }
  // @fastify/swagger always writes `paths`, and `responses` for every operation.
  const { paths } = document as { paths: OpenApiPaths }
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses)) {
        response.headers = { 'X-Request-Id': header, ...response.headers }
      }
    }
  }
  return document
}
