/**
 * What items-list is measured against (pnpm bench, pnpm bench:scale): bare Fastify routes on the
 * service's Node, Fastify and node-redis, on a client configured as the service's (no per-command
 * timeout, no offline queue), answering what the service answers, status, headers and body byte
 * for byte (a new X-Request-Id each time, as the service makes one). Each request writes the
 * service's one access line through Fastify's request logger (a child logger carrying reqId, one
 * line on response) to stdout, through the same pino.destination batching as the service's log.
 * Nothing else: no schema, hook, metric, deadline or error mapping.
 *
 * - `GET /items/`, `POST /items/`: the Redis commands the service sends for a list of one chunk,
 *   on its layout (the index and the chunk in one round trip, tombstones left out; the append script).
 * - `GET /naive/`, `POST /naive/`, `DELETE /naive/:name`: one `LRANGE 0 -1`, `RPUSH` or `LREM` of a
 *   plain Redis list at NAIVE_KEY, the way an earlier version kept it: what the stack does at its
 *   simplest, and, on a long list, what it cannot do well (pnpm bench:scale).
 * - `GET /`: the greeting, for bench:scale's other clients.
 *
 * Usage: HEADERS='{"GET":{…},"POST":{…}}' PORT=<port> REDIS_PORT=<port> [NAIVE_KEY=naive] node bench/ceiling.ts
 */
import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import { pino } from 'pino'
import { createClient } from 'redis'
import { AccessLog } from '@repo/service-kit'
import { listKeys, liveNames } from '../src/store/layout.ts'
import { appendArguments, ITEM_STORE_SCRIPTS } from '../src/store/scripts.ts'

const KEYS = listKeys('items')
const APPEND = appendArguments(KEYS, Number.MAX_SAFE_INTEGER, 86_400)
const NAIVE_KEY = process.env.NAIVE_KEY ?? 'naive'
const ADDED = JSON.stringify({ message: 'Item added successfully' })
const headers = JSON.parse(process.env.HEADERS ?? '') as Record<'GET' | 'POST', Record<string, string>>

/** The service's own log destination: stdout, written in batches of 4 KB or more. */
const stdout = pino.destination({ dest: 1, minLength: 4096, sync: true })

const redis = createClient({
  socket: { host: '127.0.0.1', port: Number(process.env.REDIS_PORT) },
  disableOfflineQueue: true,
  commandOptions: { timeout: 0 },
  scripts: ITEM_STORE_SCRIPTS,
})
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
  const [, entries] = await Promise.all([redis.zRange(KEYS.index, '-inf', '+inf', { BY: 'SCORE', LIMIT: { offset: 0, count: 10 } }), redis.lRange(KEYS.chunk(1), 0, -1)])
  const items = liveNames(entries)
  return reply.header('x-request-id', request.id).headers(headers.GET).send(`{"items":${JSON.stringify(items)}}`)
})
app.post<{ Body: { name: string } }>('/items/', async (request, reply) => {
  await redis.appendGroup(APPEND, '', [{ name: request.body.name }])
  return reply.code(201).header('x-request-id', request.id).headers(headers.POST).send(ADDED)
})
app.get('/naive/', async (request, reply) => {
  const items = await redis.lRange(NAIVE_KEY, 0, -1)
  return reply.header('x-request-id', request.id).headers(headers.GET).send(JSON.stringify({ items }))
})
app.post<{ Body: { name: string } }>('/naive/', async (request, reply) => {
  await redis.rPush(NAIVE_KEY, request.body.name)
  return reply.code(201).header('x-request-id', request.id).headers(headers.POST).send(ADDED)
})
app.delete<{ Params: { name: string } }>('/naive/:name', async (request, reply) => {
  const removed = await redis.lRem(NAIVE_KEY, 0, request.params.name)
  const body = removed === 0 ? { detail: 'Item not found' } : { message: `Item ${request.params.name} deleted successfully` }
  return reply.code(removed === 0 ? 404 : 200).header('x-request-id', request.id).headers(headers.GET).send(JSON.stringify(body))
})
app.get('/', async (request, reply) => reply.header('x-request-id', request.id).headers(headers.GET).send('{"message":"Hello World"}'))
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
// Ended by SIGTERM, it exits as the service does, so that `--cpu-prof` writes its profile (bench:profile).
process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)))
