// The OpenTelemetry SDK and its instrumentations, in a module of their own so that only a service
// that traces loads them (`tracing.ts` imports this file when tracing is on).
import { context, logs, propagation, trace } from '@opentelemetry/api'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { RedisInstrumentation } from '@opentelemetry/instrumentation-redis'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { SimpleSpanProcessor } from '@opentelemetry/sdk-trace'
import type { Tracing, TracingOptions } from './tracing.ts'

/** Probes and scrapes come every few seconds from every balancer and Prometheus: traces of them would bury the requests. */
const UNTRACED_PATHS = new Set(['/health', '/ready', '/metrics'])

/**
 * The OpenTelemetry SDK, imported only by `startTracing` once tracing is asked for. The
 * standard `OTEL_*` variables configure it (exporter, OTLP endpoint, protocol and headers,
 * sampler, propagators, resource attributes); the service's name is `service.name` unless they
 * say otherwise. Spans only: the services' metrics are Prometheus's, their logs go to stdout.
 */
export function startOpenTelemetry(options: TracingOptions): Tracing {
  const fastify = new FastifyOtelInstrumentation({
    // A span per request and one for its handler (which restores the request's context after
    // the body is read); one per hook would double the spans of every request and say little.
    instrumentHooks: false,
    ignorePaths: ({ url }) => UNTRACED_PATHS.has(url.split('?', 1)[0]!),
    // Named as the HTTP semantic conventions name a server span: method and route, the method
    // alone for a path no route matches (a scanner's thousand paths are not a thousand names).
    requestHook: (span, request) => span.updateName(request.routeOptions.url ? `${request.method} ${request.routeOptions.url}` : request.method),
  })
  const instrumentations = [
    fastify,
    new UndiciInstrumentation(),
    // The command's name only: its arguments hold item names, cache keys and Lua scripts.
    new RedisInstrumentation({ dbStatementSerializer: (command) => command }),
  ]
  const sdk = new NodeSDK({
    // Detected attributes (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) are merged over these.
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': options.serviceName })),
    instrumentations,
    metricReaders: [],
    logRecordProcessors: [],
    ...(options.exporter ? { spanProcessors: [new SimpleSpanProcessor({ exporter: options.exporter })] } : {}),
  })
  sdk.start()
  return {
    fastifyPlugin: fastify.plugin(),
    logFields: logFieldsOfActiveSpan,
    async shutdown() {
      for (const instrumentation of instrumentations) instrumentation.disable()
      await sdk.shutdown()
      // The next start in this process (a test's) registers its own providers, context and propagator.
      trace.disable()
      logs.disable()
      context.disable()
      propagation.disable()
    },
  }
}

function logFieldsOfActiveSpan(): Record<string, string> {
  const span = trace.getActiveSpan()
  if (!span) return {}
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}
