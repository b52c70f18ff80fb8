import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ErrorDetail, Status } from './schemas.ts'

/** Liveness for the orchestrator, readiness for the load balancer. */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/health',
    // Probed every few seconds: not worth an access line.
    { schema: { summary: 'The process is running', response: { 200: Status } }, logLevel: 'warn' },
    async () => ({ status: 'ok' }),
  )

  app.get(
    '/ready',
    {
      schema: {
        summary: "Redis answers and the list's keys agree; 503 while they do not, or while the process drains before stopping",
        response: { 200: Status, 503: ErrorDetail },
      },
      logLevel: 'warn',
      preHandler: app.notReadyWhileDraining,
    },
    async () => {
      await app.itemStore.check()
      return { status: 'ready' }
    },
  )
}
