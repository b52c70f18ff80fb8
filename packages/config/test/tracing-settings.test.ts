import t from 'tap'
import { Type } from '@sinclair/typebox'
import { ConfigError, loadConfig, tracingSettings } from '../src/index.ts'

const Schema = Type.Object(tracingSettings())

t.test('the standard OTEL_* variables are all optional: none set, none read', async (t) => {
  t.same(loadConfig(Schema, {}), {})
})

t.test('well-formed OTEL_* values are accepted as the specification writes them', async (t) => {
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/v1/traces',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: 'api-key=secret',
    OTEL_TRACES_EXPORTER: 'otlp, console',
    OTEL_SERVICE_NAME: 'forge-aggregator-eu',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.25',
    OTEL_PROPAGATORS: 'tracecontext,baggage',
    OTEL_SDK_DISABLED: 'false',
  }
  t.same(loadConfig(Schema, env), { ...env, OTEL_TRACES_SAMPLER_ARG: 0.25 })
})

t.test('a mistyped OTEL_* value is a start-up error naming it', async (t) => {
  const error = t.throws(() =>
    loadConfig(Schema, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_TRACES_EXPORTER: 'otlp,jaegr',
      OTEL_TRACES_SAMPLER: 'sometimes',
      OTEL_TRACES_SAMPLER_ARG: '2',
      OTEL_PROPAGATORS: 'w3c',
      OTEL_SDK_DISABLED: 'yes',
    }),
  )
  t.type(error, ConfigError)
  t.same(
    (error as ConfigError).problems.map((line) => line.split(' ')[0]),
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_EXPORTER', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_PROPAGATORS', 'OTEL_SDK_DISABLED'],
  )
})
