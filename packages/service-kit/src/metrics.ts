import { Histogram, collectDefaultMetrics, type Registry } from 'prom-client'
import type { FastifyInstance } from 'fastify'

/** From 5 ms to 10 s: items-list answers in about a millisecond, the aggregator waits on the network. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/**
 * Serves `registry` at `GET /metrics` in Prometheus's text format, after adding the process and
 * Node.js default metrics and `http_request_duration_seconds` {method, route, status_code} to it.
 * The registry is the app's own, never prom-client's global one, so that several apps can live in
 * one process (tests do) and a service adds its own metrics to the same page.
 */
export function registerMetrics(app: FastifyInstance, registry: Registry): void {
  collectDefaultMetrics({ register: registry })
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by route pattern',
    labelNames: ['method', 'route', 'status_code'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  })

  app.addHook('onResponse', (request, reply, done) => {
    // The route's pattern, never the URL: one series per route, whatever callers send.
    const route = request.routeOptions.url ?? 'unmatched'
    duration.observe({ method: request.method, route, status_code: reply.statusCode }, reply.elapsedTime / 1000)
    done()
  })

  app.get(
    '/metrics',
    {
      schema: {
        summary: 'Prometheus metrics',
        response: { 200: { description: 'Prometheus text format', content: { [registry.contentType]: { schema: { type: 'string' } } } } },
      },
      // Scraped every few seconds: not worth an access line.
      logLevel: 'warn',
    },
    async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
  )
}
