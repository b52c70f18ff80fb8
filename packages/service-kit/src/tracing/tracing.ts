import type { FastifyPluginCallback } from 'fastify'
import type { SpanExporter } from '@opentelemetry/sdk-trace'

/**
 * OpenTelemetry tracing, started only when the standard variables ask for it (docs/monitoring.md,
 * *Tracing*). This module loads nothing of OpenTelemetry: the SDK and its instrumentations are
 * imported by `startTracing` when tracing is on, so a service that does not trace pays nothing
 * for it.
 */

export interface TracingOptions {
  /** The service's name: `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) replaces it. */
  serviceName: string
  /** The process environment: whether to trace. The SDK reads the standard `OTEL_*` variables from `process.env` itself. */
  env: NodeJS.ProcessEnv
  /** Where spans go instead of `OTEL_TRACES_EXPORTER`'s exporter, one at a time: tests bring an in-memory one. */
  exporter?: SpanExporter
}

/** Tracing as it runs in this process. */
export interface Tracing {
  /** `@fastify/otel`: a server span per request, continuing the caller's `traceparent`. */
  fastifyPlugin: FastifyPluginCallback
  /** The `trace_id` and `span_id` of the span a log line is written in (none outside a span). */
  logFields: () => Record<string, string>
  /** Exports the spans not yet sent and takes the SDK down (a later `startTracing` may start again); once only. */
  shutdown(): Promise<void>
}

let active: Tracing | undefined

/**
 * Whether the environment asks for traces: an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * its traces-only form) or an exporter named in `OTEL_TRACES_EXPORTER`. `none` there, or
 * `OTEL_SDK_DISABLED=true`, turns tracing off whatever else is set, as the specification says.
 */
export function isTracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporters = env.OTEL_TRACES_EXPORTER?.trim()
  if (exporters === 'none') return false
  return Boolean(exporters || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim())
}

/**
 * Starts tracing when `isTracingRequested(env)` (or when a test brings its exporter) and returns
 * it; otherwise loads nothing and returns undefined. Call it before importing the modules to be
 * traced: the Redis client's instrumentation patches its module when that module loads. Throws
 * when tracing already runs in this process (OpenTelemetry's provider is process-wide).
 */
export async function startTracing(options: TracingOptions): Promise<Tracing | undefined> {
  if (!options.exporter && !isTracingRequested(options.env)) return undefined
  if (active) throw new Error('tracing is already running in this process')
  const { startOpenTelemetry } = await import('./sdk.ts')
  const started = startOpenTelemetry(options)
  const tracing: Tracing = {
    ...started,
    async shutdown() {
      // Once only: a second call must not take down the tracing a later start registered.
      if (active !== tracing) return
      active = undefined
      await started.shutdown()
    },
  }
  active = tracing
  return tracing
}

/** The tracing started in this process, if any: what the logger and the plugins ask. */
export function activeTracing(): Tracing | undefined {
  return active
}
