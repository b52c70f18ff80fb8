import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { HttpError } from '@repo/http-errors'
import type { ItemStore } from '../item-store.ts'
import { ErrorDetail, ItemList, ItemNameParams, Message, NewItem } from './items.schema.ts'

const STORE_DOWN = { 503: ErrorDetail }
const BAD_BODY = { 400: ErrorDetail, 413: ErrorDetail, 415: ErrorDetail, 422: ErrorDetail }

/** The list itself: append, read, delete every occurrence of a name. */
export const itemRoutes: FastifyPluginAsyncTypebox<{ store: ItemStore }> = async (app, { store }) => {
  app.post(
    '/items/',
    {
      schema: {
        summary: 'Append a name to the end of the list',
        body: NewItem,
        response: { 201: Message, ...BAD_BODY, ...STORE_DOWN },
      },
    },
    async (request, reply) => {
      await store.append(request.body.name)
      return reply.code(201).send({ message: 'Item added successfully' })
    },
  )

  app.get(
    '/items/',
    { schema: { summary: 'Every name, in insertion order', response: { 200: ItemList, ...STORE_DOWN } } },
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
