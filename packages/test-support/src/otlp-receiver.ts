// A local OTLP/HTTP receiver that keeps every span it is sent, for the tests of tracing.
import { createServer } from 'node:http'
import { once } from 'node:events'

/** One span as OTLP/HTTP's JSON encoding carries it (the fields the tests read). */
export interface OtlpSpan {
  name: string
  traceId: string
  spanId: string
  parentSpanId?: string
  kind: number
  /** The `service.name` of the resource that sent it. */
  serviceName: string | undefined
}

export interface OtlpReceiver {
  /** What `OTEL_EXPORTER_OTLP_ENDPOINT` points at. */
  url: string
  /** Each request received, as `METHOD path`. */
  requests: string[]
  /** Every span received so far, in order. */
  spans(): OtlpSpan[]
  close(): Promise<void>
}

interface ExportTraceServiceRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: { stringValue?: string } }[] }
    scopeSpans?: { spans?: Omit<OtlpSpan, 'serviceName'>[] }[]
  }[]
}

/**
 * An OpenTelemetry collector's OTLP/HTTP traces endpoint, for a service run with
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`: it keeps every span it is sent and answers 200 as a
 * collector does.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const requests: string[] = []
  const bodies: ExportTraceServiceRequest[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      requests.push(`${request.method} ${request.url}`)
      bodies.push(JSON.parse(Buffer.concat(chunks).toString()) as ExportTraceServiceRequest)
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    spans: () =>
      bodies.flatMap((body) =>
        (body.resourceSpans ?? []).flatMap((resource) => {
          const serviceName = resource.resource?.attributes?.find((attribute) => attribute.key === 'service.name')?.value.stringValue
          return (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => ({ ...span, serviceName })))
        }),
      ),
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}
