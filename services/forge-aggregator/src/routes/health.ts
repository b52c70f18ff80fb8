import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

const Status = Type.Object({ status: Type.String() })

/** Liveness and readiness. Readiness never calls the upstream: that would spend the callers' quota. */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health', { schema: { summary: 'The process is running', response: { 200: Status } }, logLevel: 'warn' }, async () => ({
    status: 'ok',
  }))
  app.get('/ready', { schema: { summary: 'The service can serve', response: { 200: Status } }, logLevel: 'warn' }, async () => ({
    status: 'ready',
  }))
}
