import { collectDefaultMetrics } from 'prom-client'
import fp from 'fastify-plugin'
import { SeriesHistogram, type HistogramSeries } from '../series-histogram.ts'

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
    const duration = new SeriesHistogram({
      name: 'http_request_duration_seconds',
      help: 'Time to answer an HTTP request, by route pattern',
      labelNames: ['method', 'route', 'status_code'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    })

    // Each series is bound the first time its route, method and status are seen, and found again
    // by three map lookups on values Fastify already holds: building a string key per request
    // (number to string, concatenation, hashing) cost more than the observation.
    const seriesByRoute = new Map<string, Map<string, Map<number, HistogramSeries>>>()
    const seriesOf = (method: string, route: string, status: number): HistogramSeries => {
      const byMethod = cached(seriesByRoute, route, () => new Map<string, Map<number, HistogramSeries>>())
      const byStatus = cached(byMethod, method, () => new Map<number, HistogramSeries>())
      return cached(byStatus, status, () => duration.series({ method, route, status_code: status }))
    }

    app.addHook('onResponse', (request, reply, done) => {
      // The route's pattern, never the URL: one series per route, whatever callers send.
      seriesOf(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode).observe(reply.elapsedTime / 1000)
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

/** The value `key` holds in `map`, made and kept the first time it is asked for. */
function cached<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key)
  if (value === undefined) {
    value = make()
    map.set(key, value)
  }
  return value
}
