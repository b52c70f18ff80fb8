import t from 'tap'
import { SpanKind, trace } from '@opentelemetry/api'
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace'
import { activeTracing, startTracing } from '../../src/tracing/tracing.ts'
import { eventually, startPrivateRedis } from '@repo/test-support'

// Started before the Redis client loads (the helper loads it): it is instrumented as it loads.
const exporter = new InMemorySpanExporter()
const tracing = (await startTracing({ serviceName: 'kit', env: {}, exporter }))!
const { buildService } = await import('../helpers/service.ts')
const { createClient } = await import('redis')
t.teardown(() => tracing.shutdown())
t.beforeEach(() => exporter.reset())

const serverSpanNames = () => exporter.getFinishedSpans().filter((span) => span.kind === SpanKind.SERVER).map((span) => span.name)

t.test('a request is one server span named by its method and route, by its method alone where no route matches', async (t) => {
  const { app } = await buildService(t)
  await app.inject({ url: '/things/1?full=yes' })
  await app.inject({ url: '/nowhere?x=1' })
  // A span reaches the exporter once it ends, which may be after inject has resolved (a mutation run saw the last one missing).
  await eventually(async () => serverSpanNames().length >= 2)
  t.same(serverSpanNames(), ['GET /things/:id', 'GET'])
})

t.test("a request's spans are its server span and its handler's, no span per hook, named for the service", async (t) => {
  const { app } = await buildService(t)
  await app.inject({ url: '/things/1' })
  const spans = exporter.getFinishedSpans()
  t.same(spans.map((span) => span.kind).sort(), [SpanKind.INTERNAL, SpanKind.SERVER].sort(), spans.map((span) => span.name).join(', '))
  for (const span of spans) t.equal(span.resource.attributes['service.name'], 'kit')
})

t.test('probes and scrapes are not traced', async (t) => {
  const { app } = await buildService(t)
  for (const url of ['/health', '/ready?verbose=1', '/metrics']) t.equal((await app.inject({ url })).statusCode, 200)
  t.same(serverSpanNames(), [])
})

t.test('a log line written inside a span carries its trace_id and span_id; one written outside carries neither', async (t) => {
  const { app, lines } = await buildService(t)
  await app.inject({ url: '/things/1' })
  app.log.info('outside')
  const handler = exporter.getFinishedSpans().find((span) => span.name.startsWith('handler'))!
  t.match(lines.find((line) => line.msg === 'handling'), { trace_id: handler.spanContext().traceId, span_id: handler.spanContext().spanId })
  const outside = lines.find((line) => line.msg === 'outside')!
  t.notOk('trace_id' in outside || 'span_id' in outside)
})

t.test('a Redis command is a span that names the command, never its keys or values', async (t) => {
  const redis = await startPrivateRedis({ durable: false })
  const client = createClient({ url: `redis://127.0.0.1:${redis.port}` })
  t.teardown(async () => {
    client.destroy()
    await redis.dispose()
  })
  await client.connect()
  await client.set('secret-key', 'secret-value')
  const set = exporter.getFinishedSpans().find((span) => span.name === 'redis-SET')
  t.match(set?.attributes, { 'db.operation.name': 'SET', 'db.query.text': 'SET' })
  t.notMatch(JSON.stringify(exporter.getFinishedSpans().map((span) => span.attributes)), 'secret')
})

t.test('tracing runs once per process: a second start is refused until the first shuts down, once', async (t) => {
  await t.rejects(startTracing({ serviceName: 'again', env: {}, exporter }), /already running/)
  await tracing.shutdown()
  t.equal(activeTracing(), undefined)
  t.notOk(trace.isSpanContextValid(trace.getTracer('probe').startSpan('probe').spanContext()), 'its provider is gone')

  const second = new InMemorySpanExporter()
  const restarted = (await startTracing({ serviceName: 'again', env: {}, exporter: second }))!
  await tracing.shutdown()
  t.equal(activeTracing(), restarted, 'shutting the first down again leaves the second running')
  trace.getTracer('probe').startSpan('after restart').end()
  // A span is exported once its resource's attributes are all known.
  t.ok(await eventually(async () => second.getFinishedSpans().some((span) => span.name === 'after restart')))
  await restarted.shutdown()
})
