// runService with tracing on, as a process: apart from run-service.test.ts, whose processes
// already take most of a file's time limit on a loaded machine. No drain delay: these tests are
// about what the spans say, not about the drain (drain-process.test.ts).
import t from 'tap'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { LISTENING, runServiceSource, startOtlpReceiver } from '@repo/test-support'

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url))

function startFixture(env: Record<string, string>) {
  return runServiceSource(PACKAGE_ROOT, { HOST: '127.0.0.1', SHUTDOWN_DELAY_SECONDS: '0', ...env }, 'test/fixtures/slow-service.ts')
}

async function portOf(service: ReturnType<typeof startFixture>): Promise<number> {
  const [, port] = await service.waitFor(LISTENING)
  return Number(port)
}

t.test('with OTEL_EXPORTER_OTLP_ENDPOINT its spans go over OTLP/HTTP, named by the service, the last ones sent at SIGTERM', async (t) => {
  const receiver = await startOtlpReceiver()
  const service = startFixture({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    // No batch leaves on its own during the test: what arrives was sent by the shutdown.
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  })
  t.teardown(async () => {
    service.child.kill('SIGKILL')
    await receiver.close()
  })
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
  const receiver = await startOtlpReceiver()
  const service = startFixture({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'slow-eu',
    OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,deployment.environment.name=test',
  })
  t.teardown(async () => {
    service.child.kill('SIGKILL')
    await receiver.close()
  })
  const port = await portOf(service)
  await (await request(`http://127.0.0.1:${port}/slow`)).body.dump()
  service.child.kill('SIGTERM')
  t.equal(await service.exited, 0)
  t.same(new Set(receiver.spans().map((span) => span.serviceName)), new Set(['slow-eu']))
})

t.test('with tracing on, the lines of the logger runService makes carry the trace_id and span_id of the request they are written in', async (t) => {
  const receiver = await startOtlpReceiver()
  const service = startFixture({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })
  t.teardown(async () => {
    service.child.kill('SIGKILL')
    await receiver.close()
  })
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
