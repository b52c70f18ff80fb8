// `createLogger`: the services' pino logger, which keeps credentials and stack traces out of every
// line and adds the trace's ids when tracing runs.
import { pino, stdSerializers, type DestinationStream, type Logger } from 'pino'
import { activeTracing } from '../tracing/tracing.ts'

/**
 * Credentials never reach a log line where a serializer or a caller could put them. Exact paths
 * only: a wildcard makes pino's redaction walk every object of every line (docs/benchmarks.md).
 */
const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers["proxy-authorization"]',
  'headers.cookie',
  'password',
  'token',
]

/**
 * The one logger a service writes with, in production (`runService`) and in its tests alike:
 * JSON lines at `level`, credentials redacted, errors under `err` with pino's standard
 * serializer (type, message with its causes, code, own fields) minus the stack, which belongs
 * in no log line an operator ships around. When tracing runs (`startTracing` before this), every
 * line written inside a span carries its `trace_id` and `span_id`; otherwise lines cost nothing more.
 */
export function createLogger(level: string, destination: DestinationStream): Logger {
  const tracing = activeTracing()
  return pino({ level, redact: LOG_REDACT_PATHS, serializers: { err: errorWithoutStack }, ...(tracing ? { mixin: tracing.logFields } : {}) }, destination)
}

function errorWithoutStack(error: unknown): unknown {
  const serialized = stdSerializers.err(error as Error) as unknown
  if (typeof serialized === 'object' && serialized !== null) delete (serialized as { stack?: string }).stack
  return serialized
}
