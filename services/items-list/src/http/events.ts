// `GET /items/events`: the list's change feed as Server-Sent Events (docs/events.md).
import { PassThrough } from 'node:stream'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { HttpError } from '@repo/http-errors'
import { createEventStream } from './event-stream.ts'
import { createEventMetrics } from './event-metrics.ts'
import { ErrorDetail } from './schemas.ts'

export interface EventRoutesOptions {
  /** ITEMS_EVENTS_MAX_STREAMS: streams one replica keeps open. */
  maxStreams: number
  /** ITEMS_EVENTS_BUFFER_BYTES: bytes queued for one watcher past which its stream is ended. */
  bufferBytes: number
}

/** A comment line this often keeps an idle stream open through proxies. */
const COMMENT_INTERVAL_MS = 15_000

const EventsQuery = Type.Object({
  lastEventId: Type.Optional(Type.String({ maxLength: 128, description: 'Where to resume, as the Last-Event-ID header says it (the header wins)' })),
})

/**
 * The route, its streams (each one `createEventStream`, fed by the replica's one reader), the
 * comment every 15 s, and the end of every stream when the app closes (after the drain).
 */
export const eventRoutes: FastifyPluginAsyncTypebox<EventRoutesOptions> = async (app, { maxStreams, bufferBytes }) => {
  const { reads, reader } = app.itemFeed
  const metrics = createEventMetrics(app.metrics, () => reader.lastAnswer)
  const streams = new Set<ReturnType<typeof createEventStream>>()
  const comments = setInterval(() => {
    for (const stream of streams) stream.comment()
  }, COMMENT_INTERVAL_MS)
  comments.unref()
  app.addHook('preClose', async () => {
    clearInterval(comments)
    for (const stream of streams) stream.end()
  })

  app.get(
    '/items/events',
    {
      schema: {
        summary: 'Watch the list: a snapshot, then every change (Server-Sent Events)',
        description:
          'text/event-stream. Without Last-Event-ID (header, or ?lastEventId=): `reset`, the list as `append` events, `synced`, then every change (`append`, `remove`, `reset`). With one still kept: only the events after it. See docs/events.md.',
        querystring: EventsQuery,
        response: { 503: ErrorDetail },
      },
    },
    async (request, reply) => {
      if (streams.size >= maxStreams) throw new HttpError(503, { detail: `This replica has ${maxStreams} event streams open, the most it may: retry later or elsewhere` })
      const header = request.headers['last-event-id']
      const lastEventId = [header].flat()[0] ?? request.query.lastEventId
      await reader.ready()
      const sink = new PassThrough()
      const stream = createEventStream(sink, lastEventId, { reads, bufferBytes, reports: metrics.reports, cut: () => reply.raw.destroy() })
      streams.add(stream)
      metrics.streamOpened()
      const stopListening = reader.listen(stream.listener)
      reply.raw.once('close', () => stream.end())
      sink.once('close', () => {
        stopListening()
        if (streams.delete(stream)) metrics.streamClosed()
      })
      stream.run().catch((error: unknown) => {
        request.log.warn({ err: error }, 'an event stream failed: the client resumes from its last id')
        stream.end()
      })
      // The stream is no body a response schema describes: sent as it is, past the typed reply.
      return (reply as FastifyReply)
        .header('content-type', 'text/event-stream; charset=utf-8')
        .header('cache-control', 'no-cache')
        .header('x-accel-buffering', 'no')
        .send(sink)
    },
  )
}
