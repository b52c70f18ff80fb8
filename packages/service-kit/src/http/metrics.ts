// `GET /metrics`: the process's metrics and every request's duration, from the app's own registry.
import { collectDefaultMetrics, Histogram } from 'prom-client'
import fp from 'fastify-plugin'

/** From 5 ms to 10 s: items-list answers in about a millisecond, the aggregator waits on the network. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/**
 * Adds the process and Node.js default metrics and `http_request_duration_seconds` {method,
 * route, status_code} to the app's registry (`app.metrics`, made by `createServer`), and serves
 * it at `GET /metrics` in Prometheus's text format.
 */
export const metrics = fp(
  async (app) => {
    const registry = app.metrics
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
  },
  { name: 'metrics', fastify: '5.x' },
)
