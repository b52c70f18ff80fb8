import helmet, { type HelmetOptions } from 'helmet'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'

/**
 * Helmet's headers on every answer, computed once. @fastify/helmet rebuilds helmet's middleware
 * for every request, which cost items-list an eighth of its CPU per request; with no nonce and no
 * per-route policy the headers never change, so helmet is asked for them once, at startup, and
 * each answer gets the same set.
 */
export function addSecurityHeaders(app: FastifyInstance, options: HelmetOptions): void {
  const headers = headersOf(options)
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers)
    done()
  })
}

/** Runs helmet's middleware once against a response that only records the headers it is given. */
function headersOf(options: HelmetOptions): Record<string, string> {
  const headers: Record<string, string> = {}
  const recorder = {
    setHeader: (name: string, value: string) => (headers[name.toLowerCase()] = value),
    removeHeader: () => {},
  }
  helmet(options)({} as IncomingMessage, recorder as unknown as ServerResponse, () => {})
  return headers
}
