import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorBody } from './schemas.ts'

const Status = Type.Object({ status: Type.String() })

/**
 * Liveness and readiness. Readiness never calls the upstream (that would spend the callers'
 * quota): it fails only while the process drains before it stops.
 */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health', { schema: { summary: 'The process is running', response: { 200: Status } }, logLevel: 'warn' }, async () => ({
    status: 'ok',
  }))
  app.get(
    '/ready',
    {
      schema: { summary: 'The service can serve; 503 while it drains before stopping', response: { 200: Status, 503: ErrorBody } },
      logLevel: 'warn',
      preHandler: app.notReadyWhileDraining,
    },
    async () => ({ status: 'ready' }),
  )
}
