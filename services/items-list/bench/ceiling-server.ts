/**
 * The two ceilings the service is measured against, each a minimal Fastify app on its own:
 *   http   answers GET and POST /items/ from memory: what HTTP on this machine allows, and so
 *          what the load generator can drive (the bench calls a run client-bound when this
 *          ceiling does not reach twice the service's requests/s).
 *   stack  answers them with the same single Redis command and the same client, configured
 *          as the service configures it (no per-command timeout, no offline queue), and
 *          nothing else: no schema, no error mapping, no logging, no metrics.
 * Both give the answer the service gives, headers included: the security headers every answer of
 * the service must carry (DESIGN §8), computed once as the service computes them, and a new
 * X-Request-Id for every request, as the service makes one. The same bytes on the wire, so that
 * the ratio measures the service's code, not the size of the answer it is required to give.
 * Usage: CEILING=<http|stack> PORT=<port> REDIS_PORT=<port> node bench/ceiling-server.ts
 */
import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyReply } from 'fastify'
import { securityHeaders } from '@repo/service-kit'
import { createClient } from 'redis'
import { PREFILLED_NAMES } from './names.ts'

const { CEILING, PORT, REDIS_PORT } = process.env
const KEY = 'items'
const ADDED = { message: 'Item added successfully' }

const app = Fastify()
const SECURITY_HEADERS = securityHeaders()
const withServiceHeaders = (reply: FastifyReply) => reply.header('x-request-id', randomUUID()).headers(SECURITY_HEADERS)

if (CEILING === 'http') {
  app.get('/items/', async (_request, reply) => withServiceHeaders(reply).send({ items: PREFILLED_NAMES }))
  app.post('/items/', async (_request, reply) => withServiceHeaders(reply).code(201).send(ADDED))
} else if (CEILING === 'stack') {
  // As service-kit's createRedisConnection configures the store's client: node-redis's default 5 s command timeout
  // costs an AbortSignal per command, which the service turns off; a ceiling that kept it would
  // be slower than the service's own client and flatter the ratio.
  const client = createClient({
    socket: { host: '127.0.0.1', port: Number(REDIS_PORT) },
    disableOfflineQueue: true,
    commandOptions: { timeout: 0 },
  })
  await client.connect()
  app.get('/items/', async (_request, reply) => withServiceHeaders(reply).send({ items: await client.lRange(KEY, 0, -1) }))
  app.post<{ Body: { name: string } }>('/items/', async (request, reply) => {
    await client.rPush(KEY, request.body.name)
    return withServiceHeaders(reply).code(201).send(ADDED)
  })
} else {
  throw new Error(`CEILING must be http or stack, not ${CEILING}`)
}

await app.listen({ host: '127.0.0.1', port: Number(PORT) })
