import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { securityHeadersOnce } from './plugins/security-headers.ts'

/** What Node reports, as what the client is told; anything else is bad framing, a 400. */
const ANSWER_OF: Readonly<Record<string, { statusCode: number; message: string }>> = {
  ERR_HTTP_REQUEST_TIMEOUT: { statusCode: 408, message: 'Request timeout' },
  HPE_HEADER_OVERFLOW: { statusCode: 431, message: 'Request header fields too large' },
}
const BAD_REQUEST = { statusCode: 400, message: 'Bad request' }

/**
 * Fastify's `clientErrorHandler`: a request Node could not parse (bad framing, a header too
 * large, too slow to arrive) never reaches Fastify's hooks, so it is answered here, in the
 * service's own error shape, with everything other answers carry: a new `X-Request-Id`, the
 * security headers, `Cache-Control: no-store`. The connection is closed after it, as Node does,
 * and one line is logged at info level with the reason (a client's mistake, not the service's).
 */
export function clientErrorHandler(errorBody: (message: string) => Record<string, unknown>) {
  const securityHeaders = Object.entries(securityHeadersOnce())
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')

  return function answerClientError(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
    // A reset connection has nobody left to answer (Node's own handler does the same).
    if (error.code === 'ECONNRESET' || socket.destroyed) return
    const { statusCode, message } = (error.code && ANSWER_OF[error.code]) || BAD_REQUEST
    const requestId = randomUUID()
    this.log.info({ reqId: requestId, statusCode, reason: error.code ?? error.message }, 'client error')
    if (socket.writable) {
      const body = JSON.stringify(errorBody(message))
      socket.write(
        `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\n` +
          'content-type: application/json; charset=utf-8\r\n' +
          `content-length: ${Buffer.byteLength(body)}\r\n` +
          'cache-control: no-store\r\n' +
          `x-request-id: ${requestId}\r\n` +
          securityHeaders +
          'connection: close\r\n\r\n' +
          body,
      )
    }
    socket.destroy()
  }
}
