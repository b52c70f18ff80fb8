// runService with tracing on, as a process: apart from run-service.test.ts, whose processes
// already take most of a file's time limit on a loaded machine. No drain delay: these tests are
// about what the spans say, not about the drain (drain-process.test.ts).
import t, { type Test } from 'tap'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { LISTENING, runServiceSource, startOtlpReceiver } from '@repo/test-support'

const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The fixture service sending its spans to a receiver of the test's, over OTLP/HTTP; both stopped at the end. */
async function startTraced(t: Test, env: Record<string, string> = {}) {
  const receiver = await startOtlpReceiver()
  const service = runServiceSource(
    PACKAGE_ROOT,
    { HOST: '127.0.0.1', SHUTDOWN_DELAY_SECONDS: '0', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', ...env },
    'test/fixtures/slow-service.ts',
  )
  t.teardown(async () => {
    service.child.kill('SIGKILL')
    await receiver.close()
  })
  return { receiver, service }
}

async function portOf(service: ReturnType<typeof runServiceSource>): Promise<number> {
  const [, port] = await service.waitFor(LISTENING)
  return Number(port)
}

t.test('with OTEL_EXPORTER_OTLP_ENDPOINT its spans go over OTLP/HTTP, named by the service, the last ones sent at SIGTERM', async (t) => {
  // No batch leaves on its own during the test: what arrives was sent by the shutdown.
  const { receiver, service } = await startTraced(t, { OTEL_BSP_SCHEDULE_DELAY: '600000' })
  const port = await portOf(service)
  const response = await request(`http://127.0.0.1:${port}/slow`)
  t.equal(response.statusCode, 200)
  await response.body.dump()
  t.same(receiver.spans(), [], 'nothing sent yet')

  service.child.kill('SIGTERM')
  t.equal(await service.exited, 0)
  t.same(new Set(receiver.requests), new Set(['POST /v1/traces']))
  t.ok(receiver.spans().some((span) => span.name === 'GET /slow'), "the request's server span")
  t.same(new Set(receiver.spans().map((span) => span.serviceName)), new Set(['slow']))
})

t.test("OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the spans instead of the service's own name", async (t) => {
  const { receiver, service } = await startTraced(t, {
    OTEL_SERVICE_NAME: 'slow-eu',
    OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,deployment.environment.name=test',
  })
  const port = await portOf(service)
  await (await request(`http://127.0.0.1:${port}/slow`)).body.dump()
  service.child.kill('SIGTERM')
  t.equal(await service.exited, 0)
  t.same(new Set(receiver.spans().map((span) => span.serviceName)), new Set(['slow-eu']))
})

t.test('with tracing on, the lines of the logger runService makes carry the trace_id and span_id of the request they are written in', async (t) => {
  const { receiver, service } = await startTraced(t)
  const port = await portOf(service)
  const traceId = '0af7651916cd43dd8448eb211c80319c'
  const response = await request(`http://127.0.0.1:${port}/fast`, { headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } })
  t.equal(response.statusCode, 200)
  await response.body.dump()
  service.child.kill('SIGTERM')
  t.equal(await service.exited, 0)

  const lines = service.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
  const accessLine = lines.find((line) => line.msg === 'request completed' && line.url === '/fast')
  t.equal(accessLine?.trace_id, traceId, "the access line carries the caller's trace")
  const spansOfTheTrace = new Set(receiver.spans().filter((span) => span.traceId === traceId).map((span) => span.spanId))
  t.ok(spansOfTheTrace.has(String(accessLine?.span_id)), 'and the span it was written in, one that was exported')
})
