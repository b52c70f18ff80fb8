import t from 'tap'
import { request, type IncomingMessage } from 'node:http'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { SpanKind } from '@opentelemetry/api'
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace'
import { startTracing } from '@repo/service-kit/tracing'
import { LISTENING, eventually, runServiceSource, startOtlpReceiver, startPrivateRedis } from '@repo/test-support'

// Started before the app's modules load, as server.ts does: the Redis client is instrumented as it loads.
const exporter = new InMemorySpanExporter()
const tracing = (await startTracing({ serviceName: 'items-list', env: {}, exporter }))!
const { buildService } = await import('./helpers/service.ts')
t.teardown(() => tracing.shutdown())

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const CALLER_TRACE_ID = '0af7651916cd43dd8448eb211c80319c'
const CALLER_SPAN_ID = 'b7ad6b7169203331'

t.test('a POST is one trace whose server span parents its Lua append in Redis', async (t) => {
  const { app } = await buildService(t)
  // Once Redis knows the script, an append is one EVALSHA (the first one also loads it, with EVAL).
  await app.inject({ method: 'POST', url: '/items/', payload: { name: 'fig' }, headers: { 'idempotency-key': 'k-0' } })
  exporter.reset()

  const res = await app.inject({
    method: 'POST',
    url: '/items/',
    payload: { name: 'kiwi' },
    headers: { traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01`, 'idempotency-key': 'k-1' },
  })
  t.equal(res.statusCode, 201)
  const spans = exporter.getFinishedSpans()
  const servers = spans.filter((span) => span.kind === SpanKind.SERVER)
  t.same(
    servers.map((span) => [span.name, span.spanContext().traceId, span.parentSpanContext?.spanId]),
    [['POST /items/', CALLER_TRACE_ID, CALLER_SPAN_ID]],
    "one server span, continuing the caller's trace",
  )
  const append = spans.filter((span) => span.attributes['db.system.name'] === 'redis')
  t.same(append.map((span) => span.name), ['redis-EVALSHA'], 'the append is one script run')
  t.equal(append[0]!.spanContext().traceId, CALLER_TRACE_ID, "in the request's trace")
  const handler = spans.find((span) => span.spanContext().spanId === append[0]!.parentSpanContext?.spanId)
  t.equal(handler?.parentSpanContext?.spanId, servers[0]!.spanContext().spanId, "under the request's handler")
})

t.test('with OTEL_EXPORTER_OTLP_ENDPOINT the service sends its spans over OTLP/HTTP, named items-list, the Redis append included, and its log lines carry the trace_id', async (t) => {
  const redis = await startPrivateRedis()
  const receiver = await startOtlpReceiver()
  const server = runServiceSource(SERVICE_ROOT, {
    HOST: '127.0.0.1',
    PORT: '0',
    REDIS_HOST: '127.0.0.1',
    REDIS_PORT: String(redis.port),
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    // Batches leave every 100 ms instead of every 5 s.
    OTEL_BSP_SCHEDULE_DELAY: '100',
  })
  t.teardown(async () => {
    server.child.kill('SIGKILL')
    await receiver.close()
    await redis.dispose()
  })
  const [, port] = await server.waitFor(LISTENING)
  // Through node:http, which this process does not trace: its fetch would send a traceparent of its own.
  const posted = request(`http://127.0.0.1:${port}/items/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'k-2', traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01` },
  }).end(JSON.stringify({ name: 'fig' }))
  const [res] = (await once(posted, 'response')) as [IncomingMessage]
  res.resume()
  t.equal(res.statusCode, 201)

  const spansOfTheTrace = () => receiver.spans().filter((span) => span.traceId === CALLER_TRACE_ID)
  t.ok(await eventually(async () => spansOfTheTrace().some((span) => /^redis-EVAL/.test(span.name))), 'the Lua append arrived')
  t.same(new Set(receiver.requests), new Set(['POST /v1/traces']))
  t.ok(spansOfTheTrace().some((span) => span.name === 'POST /items/'), 'the server span arrived')
  t.same(new Set(spansOfTheTrace().map((span) => span.serviceName)), new Set(['items-list']))

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  // The process's own logger, made by runService once tracing has started.
  const accessLine = server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((line) => line.msg === 'request completed' && line.url === '/items/')
  t.equal(accessLine?.trace_id, CALLER_TRACE_ID, "its access line carries the caller's trace_id")
})
