import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { describeError } from '@repo/http-errors'

/**
 * One access-log line per request, written when the answer has been sent, instead of Fastify's
 * two (received + completed): half the logging work on every request. The "incoming request"
 * line stays available at debug level.
 */
export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = { req: request, res: reply, responseTime: reply.elapsedTime }
    if (error) reply.log.error({ ...line, error: describeError(error) }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}
