// `GET /`: the service's greeting.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Message } from './schemas.ts'

export const rootRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/', { schema: { summary: 'Greeting', response: { 200: Message } } }, async () => ({ message: 'Hello World' }))
}
