import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { HttpError } from '@repo/http-errors'
import { Added, ErrorDetail, IdempotencyHeaders, ItemList, ItemNameParams, Message, NewItem } from './schemas.ts'

const STORE_DOWN = { 503: ErrorDetail }
const BAD_BODY = { 400: ErrorDetail, 413: ErrorDetail, 415: ErrorDetail, 422: ErrorDetail }
const ADDED = { message: 'Item added successfully' }

/** The list itself: append, read, delete every occurrence of a name. */
export const itemRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const store = app.itemStore

  app.post(
    '/items/',
    {
      schema: {
        summary: 'Append a name to the end of the list',
        headers: IdempotencyHeaders,
        body: NewItem,
        response: { 201: Added, ...BAD_BODY, ...STORE_DOWN },
      },
    },
    async (request, reply) => {
      const { name } = request.body
      const idempotencyKey = request.headers['idempotency-key']
      if (idempotencyKey === undefined) {
        await store.append(name)
      } else {
        const outcome = await store.appendOnce(name, idempotencyKey)
        if (outcome === 'conflict') throw new HttpError(422, { detail: 'Idempotency-Key was already used with another name' })
        if (outcome === 'replayed') reply.header('idempotent-replayed', 'true')
      }
      return reply.code(201).send(ADDED)
    },
  )

  app.get(
    '/items/',
    {
      schema: { summary: 'Every name, in insertion order', response: { 200: ItemList, ...STORE_DOWN } },
      // The answer is an array of strings straight from Redis. fast-json-stringify escapes and
      // joins them one by one in JavaScript; V8's JSON.stringify writes the same bytes natively, and
      // on a 100-name list that was 34,000 instructions a request (callgrind), 7% of the service.
      serializerCompiler: () => JSON.stringify,
    },
    async () => ({ items: await store.list() }),
  )

  app.delete(
    '/items/:item_name',
    {
      schema: {
        summary: 'Delete every occurrence of a name',
        description: 'The name is percent-decoded: `a%20b` deletes "a b", `a%2Fb` deletes "a/b".',
        params: ItemNameParams,
        response: { 200: Message, 404: ErrorDetail, 422: ErrorDetail, ...STORE_DOWN },
      },
    },
    async (request) => {
      const name = request.params.item_name
      const removed = await store.removeAll(name)
      if (removed === 0) throw new HttpError(404, { detail: 'Item not found' })
      return { message: `Item ${name} deleted successfully` }
    },
  )
}
