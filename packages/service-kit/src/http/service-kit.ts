// `serviceKit`: every plugin both services register, in one plugin and one order, with their
// options given once.
import fp from 'fastify-plugin'
import type { preHandlerHookHandler } from 'fastify'
import { errorHandling, type ErrorHandlingOptions } from '@repo/http-errors'
import { drain } from '../process/drain.ts'
import { activeTracing } from '../tracing/tracing.ts'
import { cors, type CorsOptions } from './cors.ts'
import { hostHeader } from './host-header.ts'
import { jsonBody } from './json-body.ts'
import { metrics } from './metrics.ts'
import { openapi, type OpenApiOptions } from './openapi.ts'
import { rateLimit, type RateLimitRedis } from './rate-limit.ts'
import { requestId } from './request-id.ts'
import { securityHeaders } from './security-headers.ts'

export interface ServiceKitOptions {
  /** The OpenAPI document's `info`; `title` also names the service (rate-limit keys). */
  openapi: OpenApiOptions
  /** How the service answers errors: its body shape, validation status, its own error types. */
  errors: ErrorHandlingOptions
  /** `CORS_ORIGINS`, the methods a browser may use across origins, and the headers it may read. */
  cors: CorsOptions
  /** `RATE_LIMIT_PER_MINUTE`, and the Redis where replicas count together (in the process when omitted). */
  rateLimit: { perMinute: number; redis?: RateLimitRedis | undefined }
}

/**
 * Everything both services set up the same way, before their routes, as named plugins in the
 * order a request meets them: its server span when tracing runs (`@fastify/otel`, first, so that
 * every hook after it, the rate limit's Redis command included, runs inside the span), its
 * request id, the security headers, the Host check, CORS, the rate limit (unmatched routes
 * included), its answers' error shape, strict UTF-8 JSON bodies, the OpenAPI document and Swagger
 * UI, `/metrics`, and the drain (`app.draining`: `/ready` 503 and `Connection: close` once
 * shutting down). Options are given once, here.
 */
export const serviceKit = fp<ServiceKitOptions>(
  async (app, options) => {
    const tracing = activeTracing()
    if (tracing) await app.register(tracing.fastifyPlugin)
    await app.register(requestId)
    await app.register(securityHeaders)
    await app.register(hostHeader)
    await app.register(cors, options.cors)
    await app.register(rateLimit, { ...options.rateLimit, errorBody: options.errors.errorBody, service: options.openapi.title })
    // A 404 counts against the limit too: otherwise anyone could flood the logs past it.
    const notFoundPreHandler = app.hasDecorator('rateLimit') ? (app.rateLimit() as preHandlerHookHandler) : undefined
    await app.register(errorHandling, { ...options.errors, notFoundPreHandler })
    await app.register(jsonBody)
    await app.register(openapi, options.openapi)
    await app.register(metrics)
    await app.register(drain, { errorBody: options.errors.errorBody })
  },
  { name: 'service-kit', fastify: '5.x' },
)
