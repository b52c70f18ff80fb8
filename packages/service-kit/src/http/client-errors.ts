// Requests Node cannot parse (bad framing, headers too large, too slow to arrive) never reach
// Fastify: they are answered here, in the service's shape, instead of with Node's empty answers.
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { securityHeadersOnce } from './security-headers.ts'

/** What Node reports, as what the client is told; anything else is bad framing, a 400. */
const ANSWER_OF: Readonly<Record<string, { statusCode: number; message: string }>> = {
  ERR_HTTP_REQUEST_TIMEOUT: { statusCode: 408, message: 'Request timeout' },
  HPE_HEADER_OVERFLOW: { statusCode: 431, message: 'Request header fields too large' },
}
const BAD_REQUEST = { statusCode: 400, message: 'Bad request' }

/**
 * How long a connection stays half-closed after its answer. Closing it at once would make the
 * kernel reset the connection of a client still sending (a trickled request does), and a reset
 * can discard the answer before the client reads it.
 */
const LINGER_MS = 1_000

/**
 * Fastify's `clientErrorHandler`: a request Node could not parse (bad framing, a header too
 * large, too slow to arrive) never reaches Fastify's hooks, so it is answered here, in the
 * service's own error shape, with everything other answers carry: a new `X-Request-Id`, the
 * security headers, `Cache-Control: no-store`. The connection is closed after it, as Node does
 * (after a short linger), and one line is logged at info level with the reason (a client's mistake, not the service's).
 */
export function clientErrorHandler(errorBody: (message: string) => Record<string, unknown>) {
  const securityHeaders = Object.entries(securityHeadersOnce())
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')

  return function answerClientError(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
    // A reset connection has nobody left to answer (Node's own handler does the same), and one
    // already answered gets nothing more.
    if (error.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded) return
    const { statusCode, message } = (error.code && ANSWER_OF[error.code]) || BAD_REQUEST
    const requestId = randomUUID()
    this.log.info({ reqId: requestId, statusCode, reason: error.code ?? error.message }, 'client error')
    if (!socket.writable) {
      socket.destroy()
      return
    }
    const body = JSON.stringify(errorBody(message))
    socket.end(
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\n` +
        'content-type: application/json; charset=utf-8\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        'cache-control: no-store\r\n' +
        `x-request-id: ${requestId}\r\n` +
        securityHeaders +
        'connection: close\r\n\r\n' +
        body,
    )
    setTimeout(() => socket.destroy(), LINGER_MS).unref()
  }
}
