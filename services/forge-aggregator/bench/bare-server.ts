/**
 * The throughput ceiling for a cache hit: a bare Fastify route (no schema, hooks or logging)
 * sending, as it is, the JSON string the service sent for that same request. Whatever the
 * service does beyond this is what a cache hit costs us.
 *
 * The body comes from the benchmark over the IPC channel (the first message), so that the two
 * servers send byte-for-byte the same answer. It also sends the security headers every answer of
 * the service must carry (DESIGN §8), computed once as the service computes them, so that the
 * ratio measures the service's code rather than the answer it is required to give.
 * Usage: node bench/bare-server.ts <port>
 */
import { once } from 'node:events'
import Fastify from 'fastify'
import { securityHeaders } from '@repo/service-kit'

const [body] = (await once(process, 'message')) as [unknown]
if (typeof body !== 'string') throw new TypeError('bare-server expects the body as its first IPC message')

const SECURITY_HEADERS = securityHeaders()
const app = Fastify()
app.get('/api/forge/users', async (_request, reply) => reply.headers(SECURITY_HEADERS).type('application/json; charset=utf-8').send(body))
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2]) })
