/**
 * What the aggregator's cache hits are measured against (docs/benchmarks.md): a bare Fastify route
 * on the service's Node and Fastify sending the answer the service sent for the same request, body
 * and headers byte for byte (a new X-Request-Id each time, as the service makes one), and writing
 * the same one access line per request through Fastify's request logger (a child logger carrying
 * reqId, one line on response) to stdout, with nothing else: no schema, hook, metric or redaction.
 * Usage: ANSWER='{"path":…,"headers":{…},"body":…}' PORT=<port> node bench/ceiling.ts
 */
import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import { pino } from 'pino'
import { AccessLog } from '@repo/service-kit'

const { path, headers, body } = JSON.parse(process.env.ANSWER ?? '') as { path: string; headers: Record<string, string>; body: string }
/** What Node writes itself, or what differs per request. */
const NOT_COPIED = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'x-request-id'])
const copied = Object.fromEntries(Object.entries(headers).filter(([name]) => !NOT_COPIED.has(name)))

const app = Fastify({
  // As the service writes its log: lines wait in memory until 4 KB are ready, then go out at once.
  loggerInstance: pino(pino.destination({ dest: 1, minLength: 4096, sync: true })),
  logController: new AccessLog(),
  genReqId: () => randomUUID(),
})
app.get(new URL(path, 'http://ceiling').pathname, async (request, reply) => reply.header('x-request-id', request.id).headers(copied).send(body))
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
