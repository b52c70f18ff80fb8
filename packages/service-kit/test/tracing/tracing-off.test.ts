import t from 'tap'
import { registerHooks } from 'node:module'

// Every module loaded from here on, the service's included: OpenTelemetry's SDK must not be one.
const loaded: string[] = []
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context)
    loaded.push(resolved.url)
    return resolved
  },
})
const { trace } = await import('@opentelemetry/api')
const { isTracingRequested, startTracing } = await import('../../src/tracing/tracing.ts')
const { buildService } = await import('../helpers/service.ts')

/** OpenTelemetry's SDK and instrumentations; its API (a no-op without them) may load. */
const SDK_MODULE = /\/node_modules\/(@opentelemetry\/(?!api\/)|@fastify\/otel\/)/

t.test('without OTEL_* variables no OpenTelemetry SDK loads, no tracer is registered, and log lines carry no trace ids', async (t) => {
  t.equal(await startTracing({ serviceName: 'kit', env: { PATH: '/usr/bin', NODE_ENV: 'production' } }), undefined)
  const { app, lines } = await buildService(t)
  const res = await app.inject({ url: '/things/1' })
  t.equal(res.statusCode, 200)

  t.ok(loaded.some((url) => url.includes('/fastify/')), 'the hook saw the service load')
  t.same(loaded.filter((url) => SDK_MODULE.test(url)), [], 'nothing of the SDK')
  t.notOk(trace.isSpanContextValid(trace.getTracer('probe').startSpan('probe').spanContext()), 'spans record nothing: no tracer provider')
  const handling = lines.find((line) => line.msg === 'handling')
  t.ok(handling)
  t.notOk('trace_id' in handling! || 'span_id' in handling!)
})

t.test('traces are asked for by an OTLP endpoint or an exporter, and refused by "none" or OTEL_SDK_DISABLED', async (t) => {
  t.notOk(isTracingRequested({}))
  t.notOk(isTracingRequested({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_ENDPOINT: '  ', OTEL_TRACES_EXPORTER: '' }), 'blank is unset')
  t.ok(isTracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))
  t.ok(isTracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }))
  t.ok(isTracingRequested({ OTEL_TRACES_EXPORTER: 'console' }))
  t.ok(isTracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' }))
  t.notOk(isTracingRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))
  t.notOk(isTracingRequested({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))
  t.ok(isTracingRequested({ OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))
})
