/**
 * What items-list is measured against (pnpm bench, bench/run.ts): bare Fastify routes on the
 * service's Node, Fastify and node-redis, each sending the same single Redis command on a client
 * configured as the service's (no per-command timeout, no offline queue) and answering what the
 * service answers, status, headers and body byte for byte (a new X-Request-Id each time, as the
 * service makes one). Each request writes the service's one access line through Fastify's
 * request logger (a child logger carrying reqId, one line on response) to stdout, through the
 * same pino.destination batching as the service's log. Nothing else: no schema, hook, metric, deadline or error mapping.
 * Usage: HEADERS='{"GET":{…},"POST":{…}}' PORT=<port> REDIS_PORT=<port> node bench/ceiling.ts
 */
import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import { pino } from 'pino'
import { createClient } from 'redis'
import { AccessLog } from '@repo/service-kit'

const KEY = 'items'
const ADDED = JSON.stringify({ message: 'Item added successfully' })
const headers = JSON.parse(process.env.HEADERS ?? '') as Record<'GET' | 'POST', Record<string, string>>

/** The service's own log destination: stdout, written in batches of 4 KB or more. */
const stdout = pino.destination({ dest: 1, minLength: 4096, sync: true })

const redis = createClient({ socket: { host: '127.0.0.1', port: Number(process.env.REDIS_PORT) }, disableOfflineQueue: true, commandOptions: { timeout: 0 } })
await redis.connect()

const app = Fastify({
  loggerInstance: pino(stdout),
  logController: new AccessLog(),
  genReqId: () => randomUUID(),
  // Fastify's fastest: bodies go to JSON.parse as they are, without the prototype-key checks.
  onProtoPoisoning: 'ignore',
  onConstructorPoisoning: 'ignore',
  exposeHeadRoutes: false,
})
app.get('/items/', async (request, reply) => {
  const items = await redis.lRange(KEY, 0, -1)
  return reply.header('x-request-id', request.id).headers(headers.GET).send(JSON.stringify({ items }))
})
app.post<{ Body: { name: string } }>('/items/', async (request, reply) => {
  await redis.rPush(KEY, request.body.name)
  return reply.code(201).header('x-request-id', request.id).headers(headers.POST).send(ADDED)
})
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
