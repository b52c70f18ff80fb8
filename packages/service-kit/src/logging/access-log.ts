import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'

/**
 * One access-log line per request, written when the answer has been sent, instead of Fastify's
 * two (received + completed), and holding only what an access log needs (method, URL, status,
 * client address, time) rather than the full request and reply serializers: logging was the
 * largest cost either service adds to a request. The "incoming request" line stays available at
 * debug level. Written through the request's own logger, so its `reqId`, a tracing mixin's
 * `trace_id` and the logger's redaction and hooks all apply.
 */
export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
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
