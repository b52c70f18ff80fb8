// One request id per request, the caller's `X-Request-Id` when it is safe to reuse, sent back on
// every answer: a request can then be followed through every service and log line it crosses.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import fp from 'fastify-plugin'

/** What a caller's `X-Request-Id` may be to be reused: short, and safe in a log line or a header. */
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Fastify's `genReqId` (see `createServer`): the caller's `X-Request-Id` when it is well-formed,
 * so that one id follows a request through every service it crosses; otherwise a new UUID.
 */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && CALLER_REQUEST_ID.test(given) ? given : randomUUID()
}

/** Sends the request's id back on every answer, errors and 404s included. */
export const requestId = fp(
  async (app) => {
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id)
      done()
    })
  },
  { name: 'request-id', fastify: '5.x' },
)
