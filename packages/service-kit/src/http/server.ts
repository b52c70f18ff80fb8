// `createServer`: the Fastify instance both services start from, with what they share (timeouts,
// request ids, parsing, the error shape, the metrics registry) set in one place; it never listens.
import Fastify, { type FastifyBaseLogger, type FastifyServerOptions } from 'fastify'
import { Registry } from 'prom-client'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { frameworkErrorHandler } from '@repo/http-errors'
import { AccessLog } from '../logging/access-log.ts'
import { clientErrorHandler } from './client-errors.ts'
import { requestIdOf } from './request-id.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The app's own registry, served at `/metrics`: never prom-client's global one, so that
     * several apps can live in one process (tests do) and every plugin adds its metrics to the
     * same page.
     */
    metrics: Registry
  }
}

/** A request whose headers, or headers and body, take longer than this to arrive is answered 408. */
const REQUEST_TIMEOUT_MS = 30_000
/**
 * How often Node checks those deadlines: its default, 30 s, let a request that trickled in one
 * byte a second hold its connection for up to twice the timeout before the 408.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 500

export interface ServerOptions {
  /** The process logger (`createLogger`). */
  logger: FastifyBaseLogger
  /** The service's error body for a message (for errors found before routing). */
  errorBody: (message: string) => Record<string, unknown>
  /** `TRUST_PROXY`. */
  trustProxy?: string | undefined
  /** What else the service sets (body limit, router options). */
  fastify?: Pick<FastifyServerOptions, 'bodyLimit' | 'routerOptions'>
}

/**
 * The Fastify instance of a service, with what both share: one access line per request, request
 * ids (`requestIdOf`), 30 s for a request to arrive (enforced within half a second of it, for its
 * headers and its body alike), `TRUST_PROXY`, no type coercion (`?name=1&name=2` is an array,
 * `{"name": 123}` is not a string), errors before routing and requests Node cannot parse answered
 * in the service's shape, and the app's metrics registry. It does not listen.
 */
export function createServer(options: ServerOptions) {
  const app = Fastify({
    loggerInstance: options.logger,
    logController: new AccessLog(),
    // Its log label stays Fastify's default, `reqId`.
    genReqId: requestIdOf,
    requestTimeout: REQUEST_TIMEOUT_MS,
    http: {
      requestTimeout: REQUEST_TIMEOUT_MS,
      headersTimeout: REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      // Node answers a request without Host with an empty 400 of its own; `hostHeader` answers it
      // in the service's shape instead.
      requireHostHeader: false,
    },
    clientErrorHandler: clientErrorHandler(options.errorBody),
    trustProxy: trustProxy(options.trustProxy),
    ajv: { customOptions: { coerceTypes: false } },
    frameworkErrors: frameworkErrorHandler({ errorBody: options.errorBody }),
    ...options.fastify,
  }).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('metrics', new Registry())
  return app
}

/**
 * `TRUST_PROXY` as Fastify's `trustProxy`: `true` believes every `X-Forwarded-For` hop, a number
 * that many hops, anything else is a list of the proxies' addresses or CIDRs. Unset believes
 * nobody: the client address is the socket's, so a client cannot choose its own.
 */
function trustProxy(value: string | undefined): NonNullable<FastifyServerOptions['trustProxy']> {
  if (value === undefined || value === 'false') return false
  if (value === 'true') return true
  if (/^\d+$/.test(value)) {
    const hops = Number(value)
    return (_address, hop) => hop < hops
  }
  return value.split(',').map((entry) => entry.trim())
}
