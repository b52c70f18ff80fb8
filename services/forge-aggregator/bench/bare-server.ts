/**
 * The throughput ceiling for a cache hit: a bare Fastify route (no schema, hooks or logging)
 * giving the answer the service gave for that same request, headers included. Whatever the
 * service does beyond this is what a cache hit costs us. It is also the bench's HTTP ceiling
 * (DESIGN §10): the load generator's headroom is measured against it.
 *
 * The body is the file BODY_FILE and the headers the file HEADERS_FILE, which the benchmark wrote
 * from the service's answer, so that the two servers send byte-for-byte the same answer: the
 * security headers, ETag, Cache-Control and Cache-Status as the service sent them, and an
 * X-Request-Id of its own for every request, as the service makes one. The ratio then measures
 * the service's code rather than the answer it is required to give.
 * Usage: BODY_FILE=<path> HEADERS_FILE=<path> PORT=<port> node bench/bare-server.ts
 */
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import Fastify from 'fastify'

const { BODY_FILE, HEADERS_FILE, PORT } = process.env
if (BODY_FILE === undefined || HEADERS_FILE === undefined) throw new TypeError('bare-server reads its answer from BODY_FILE and HEADERS_FILE')
const body = readFileSync(BODY_FILE, 'utf8')
/** What Node writes itself, or what differs per request. */
const NOT_COPIED = new Set(['date', 'connection', 'keep-alive', 'content-length', 'x-request-id'])
const headers = Object.fromEntries(
  Object.entries(JSON.parse(readFileSync(HEADERS_FILE, 'utf8')) as Record<string, string>).filter(([name]) => !NOT_COPIED.has(name)),
)

const app = Fastify()
app.get('/api/forge/users', async (_request, reply) => reply.headers(headers).header('x-request-id', randomUUID()).send(body))
await app.listen({ host: '127.0.0.1', port: Number(PORT) })
