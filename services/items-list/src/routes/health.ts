import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { ItemStore } from '../item-store.ts'
import { ErrorDetail } from './items.schema.ts'

const Status = Type.Object({ status: Type.String() })

/** Liveness for the orchestrator, readiness for the load balancer. */
export const healthRoutes: FastifyPluginAsyncTypebox<{ store: ItemStore }> = async (app, { store }) => {
  app.get(
    '/health',
    { schema: { summary: 'The process is running', response: { 200: Status } }, logLevel: 'warn' },
    async () => ({ status: 'ok' }),
  )

  app.get(
    '/ready',
    { schema: { summary: 'Redis answers PING', response: { 200: Status, 503: ErrorDetail } }, logLevel: 'warn' },
    async () => {
      await store.ping()
      return { status: 'ready' }
    },
  )
}
