import type { Test } from 'tap'
import { captureLogs } from '@repo/test-support'
import { createLogger, createServer, serviceKit, type ServiceKitOptions } from '../../src/index.ts'

export interface ServiceOptions {
  trustProxy?: string
  corsOrigins?: string[]
  exposedHeaders?: string[]
  rateLimit?: ServiceKitOptions['rateLimit']
  level?: string
}

const errorBody = (message: string) => ({ detail: message })

/**
 * A small service built as both real ones are (createServer, createLogger, serviceKit), with a
 * route, a route with a limit of its own, and the probes; every log line lands in `lines`.
 */
export async function buildService(t: Test, options: ServiceOptions = {}) {
  const logs = captureLogs()
  const lines: Record<string, unknown>[] = logs.lines
  const logger = createLogger(options.level ?? 'info', logs.destination)
  const app = createServer({ logger, errorBody, trustProxy: options.trustProxy })
  await app.register(serviceKit, {
    openapi: { title: 'kit', version: '1.0.0', description: 'a test service' },
    errors: { errorBody },
    cors: { origins: options.corsOrigins, methods: ['GET', 'DELETE'], exposedHeaders: options.exposedHeaders ?? [] },
    rateLimit: options.rateLimit ?? { perMinute: 0 },
  })
  app.get('/things/:id', { schema: { response: { 200: { type: 'object', properties: { id: { type: 'string' } } } } } }, async (request) => {
    request.log.info('handling')
    return { id: (request.params as { id: string }).id }
  })
  app.post('/echo', async (request) => ({ received: request.body }))
  app.get('/scarce', { config: { rateLimit: { max: 1, timeWindow: 60_000 } } }, async () => ({ ok: true }))
  app.get('/health', { logLevel: 'warn' }, async () => ({ status: 'ok' }))
  app.get('/ready', { logLevel: 'warn' }, async () => ({ status: 'ready' }))
  t.teardown(() => app.close())
  return { app, lines }
}
