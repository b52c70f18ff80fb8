import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { pino } from 'pino'

const { symbols } = pino
const INFO = 30

/** What the access line is written from: a pino logger's level and parts its types leave out. */
interface PinoInternals {
  readonly levelVal: number
  [symbols.chindingsSym]: string
  [symbols.hooksSym]: { streamWrite?: unknown }
  [symbols.mixinSym]?: unknown
  [symbols.streamSym]: { write(line: string): unknown }
  [symbols.timeSym](): string
}

/**
 * One access-log line per request, written when the answer has been sent, instead of Fastify's
 * two (received + completed), and holding only what an access log needs (method, URL, status,
 * client address, time) rather than the full request and reply serializers: logging was the
 * largest cost either service adds to a request. The "incoming request" line stays available at
 * debug level.
 */
export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const log = reply.log as unknown as PinoInternals
    if (!error && log.levelVal <= INFO && formatsPlainly(log)) {
      log[symbols.streamSym].write(completedLine(log, request, reply))
      return
    }
    const line = {
      method: request.method,
      url: request.url,
      statusCode: reply.statusCode,
      remoteAddress: request.ip,
      responseTime: reply.elapsedTime,
    }
    if (error) reply.log.error({ ...line, err: error }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}

/**
 * Whether pino would write the access line exactly as `completedLine` does: no mixin (tracing's
 * `trace_id`), no hook on the written string. Anything else goes through pino itself.
 */
function formatsPlainly(log: PinoInternals): boolean {
  return log[symbols.mixinSym] === undefined && log[symbols.hooksSym].streamWrite === undefined
}

/**
 * The line pino writes for `log.info({ method, url, statusCode, remoteAddress, responseTime },
 * 'request completed')`, byte for byte, built in one template: pino's generic path (walking the
 * object, its serializers and redaction, none of which apply to these five fields) cost about as
 * much as the rest of the access log. The method comes from Node's parser (a token); the URL and
 * the client address, which a caller chooses, are escaped as JSON.
 */
function completedLine(log: PinoInternals, request: FastifyRequest, reply: FastifyReply): string {
  const address = request.ip
  const remoteAddress = address === undefined ? '' : `,"remoteAddress":${JSON.stringify(address)}`
  return `{"level":30${log[symbols.timeSym]()}${log[symbols.chindingsSym]},"method":"${request.method}","url":${JSON.stringify(request.url)},"statusCode":${reply.statusCode}${remoteAddress},"responseTime":${reply.elapsedTime},"msg":"request completed"}\n`
}
