/**
 * The throughput ceiling for a cache hit: a bare Fastify route (no schema, hooks or logging)
 * sending, as it is, the JSON string the service sent for that same request. Whatever the
 * service does beyond this is what a cache hit costs us. It is also the bench's HTTP ceiling
 * (DESIGN §10): the load generator's headroom is measured against it.
 *
 * The body is the file BODY_FILE, which the benchmark wrote from the service's answer, so that the
 * two servers send byte-for-byte the same answer. It also sends the security headers every answer of
 * the service must carry (DESIGN §8), computed once as the service computes them, so that the
 * ratio measures the service's code rather than the answer it is required to give.
 * Usage: BODY_FILE=<path> PORT=<port> node bench/bare-server.ts
 */
import { readFileSync } from 'node:fs'
import Fastify from 'fastify'
import { securityHeaders } from '@repo/service-kit'

const { BODY_FILE, PORT } = process.env
if (BODY_FILE === undefined) throw new TypeError('bare-server reads its body from the file BODY_FILE names')
const body = readFileSync(BODY_FILE, 'utf8')

const SECURITY_HEADERS = securityHeaders()
const app = Fastify()
app.get('/api/forge/users', async (_request, reply) => reply.headers(SECURITY_HEADERS).type('application/json; charset=utf-8').send(body))
await app.listen({ host: '127.0.0.1', port: Number(PORT) })
