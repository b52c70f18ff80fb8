// How a service reads its environment: `loadConfig` against the service's TypeBox schema, and the
// settings every service shares (server, Redis, Sentinel, tracing), so that a bad variable stops
// the start with every problem named at once.
import envSchema from 'env-schema'
import { Type, type Static, type TObject, type TProperties, type TUnsafe } from '@sinclair/typebox'

/**
 * Thrown by `loadConfig` when one or more variables are invalid. `problems` holds one line per
 * bad variable, naming it and what was expected; values are never included, so a mistyped
 * secret cannot end up in a terminal or a log.
 */
export class ConfigError extends Error {
  readonly problems: readonly string[]

  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((line) => `  ${line}`).join('\n')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

/** A string variable restricted to a fixed set of values. */
function OneOf<const Values extends readonly string[]>(
  values: Values,
  options: { default?: Values[number]; description?: string } = {},
): TUnsafe<Values[number]> {
  return Type.Unsafe<Values[number]>({ type: 'string', enum: [...values], ...options })
}

/** A comma-separated variable read as a list of non-empty, trimmed entries. */
function CommaSeparated(options: { description?: string } = {}): TUnsafe<string[]> {
  // `separator` is env-schema's own keyword: it splits the string before validation ends.
  return Type.Unsafe<string[]>({ type: 'string', separator: ',', ...options })
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/**
 * `TRUST_PROXY`: `true`, `false`, a hop count, or comma-separated addresses, CIDRs and proxy-addr's
 * names (`loopback`, `linklocal`, `uniquelocal`). Only the shape is checked here; Fastify's
 * proxy-addr rejects an address it cannot parse when the app is built.
 */
const TRUST_PROXY_PATTERN = '^[0-9A-Za-z.:/]+( *, *[0-9A-Za-z.:/]+)*$'

/** The variables every service reads: where it listens, how it logs, whom it lets call it, and how often. */
export function serverSettings(defaults: { port: number }) {
  return {
    HOST: Type.String({ default: '0.0.0.0', minLength: 1, description: 'listen address' }),
    PORT: Type.Integer({ default: defaults.port, minimum: 0, maximum: 65535, description: 'listen port' }),
    LOG_LEVEL: OneOf(LOG_LEVELS, {
      default: 'info',
      description: 'fatal, error, warn, info, debug (forge-aggregator: adds one line per upstream call), trace or silent',
    }),
    CORS_ORIGINS: Type.Optional(CommaSeparated({ description: 'comma-separated allowed origins, or *' })),
    TRUST_PROXY: Type.Optional(
      Type.String({
        pattern: TRUST_PROXY_PATTERN,
        description:
          'whose X-Forwarded-For to believe about the client address: false, true (every hop), a number of hops, or comma-separated addresses/CIDRs (or loopback, linklocal, uniquelocal)',
      }),
    ),
    RATE_LIMIT_PER_MINUTE: Type.Integer({
      default: 0,
      minimum: 0,
      description:
        "requests per minute per client address, counted in the service's Redis when it has one (shared by the replicas), else per process; 0: off",
    }),
    SHUTDOWN_DELAY_SECONDS: Type.Integer({
      default: 5,
      minimum: 0,
      description: 'on SIGTERM, how long the process goes on serving, /ready answering 503, before it stops accepting; 0 stops at once',
    }),
  } satisfies TProperties
}

/**
 * Who a service connects to Redis as, and whom it trusts there (docs/design.md, *Redis ACLs and
 * the append-only file*): the same three variables for every service that has a Redis, whatever
 * says where it is.
 */
export function redisAuthSettings() {
  return {
    REDIS_USERNAME: Type.Optional(Type.String({ minLength: 1, description: 'the Redis ACL user it logs in as (its own service name in compose and Kubernetes); a user written in REDIS_URL wins' })),
    REDIS_PASSWORD: Type.Optional(Type.String({ description: "that user's password; never logged. A password written in REDIS_URL wins" })),
    REDIS_CA_FILE: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "PEM file of the CA that signed Redis's certificate (a private CA), read at start-up; only with a rediss:// REDIS_URL (TLS needs the URL form). Unreadable, or without TLS: the service refuses to start",
      }),
    ),
  } satisfies TProperties
}

/**
 * `REDIS_DEADLINE_MS`: how long Redis may take to answer one command (docs/design.md, *The Redis
 * command deadline*), for every service that has a Redis. The default keeps a request waiting on
 * a silent Redis under a second; a longer one suits a Redis that is slow to answer for reasons
 * of its own (a far network, a disk shared with other jobs), and tests whose Redis waits behind
 * other suites where the deadline is not what they test.
 */
export function redisDeadlineSettings() {
  return {
    REDIS_DEADLINE_MS: Type.Integer({
      default: 500,
      minimum: 10,
      maximum: 60_000,
      description:
        'longest Redis may take to answer one command, counted from when it is written; past it the command fails and Redis is set aside until it answers a probe. 500 keeps a request waiting on a silent Redis under a second (10–60000)',
    }),
  } satisfies TProperties
}

/** A comma-separated list of names from `names` (spaces around the commas allowed). */
function listOf(names: readonly string[]): string {
  const name = `(${names.join('|')})`
  return `^ *${name} *(, *${name} *)*$`
}

/**
 * The standard OpenTelemetry variables a service passes to its tracing (docs/monitoring.md, *Tracing*), checked
 * here so that a mistyped one stops the start instead of leaving tracing silently off; the
 * OpenTelemetry SDK reads them itself. Tracing starts only when an OTLP endpoint or an exporter
 * is set; every one is optional.
 */
export function tracingSettings() {
  const url = '^https?://[^\\s]+$'
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(
      Type.String({ pattern: url, description: "the collector's base URL (http://host:4318; traces go to /v1/traces); setting it turns tracing on" }),
    ),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ pattern: url, description: 'the full traces URL, instead of the base URL' })),
    OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(OneOf(['http/protobuf', 'http/json', 'grpc'] as const, { description: 'http/protobuf, http/json or grpc; unset: http/protobuf' })),
    OTEL_EXPORTER_OTLP_HEADERS: Type.Optional(
      Type.String({ description: 'headers for the collector, key=value,… (an API key: keep it in a secret)' }),
    ),
    OTEL_TRACES_EXPORTER: Type.Optional(
      Type.String({ pattern: listOf(['otlp', 'console', 'zipkin', 'none']), description: 'otlp, console, zipkin or none; setting it turns tracing on (none: off); unset: otlp when tracing is on' }),
    ),
    OTEL_SERVICE_NAME: Type.Optional(Type.String({ minLength: 1, description: "service.name of its spans; unset: the service's name, forge-aggregator or items-list" })),
    OTEL_RESOURCE_ATTRIBUTES: Type.Optional(Type.String({ description: 'more attributes of every span, key=value,… (deployment.environment.name=prod)' })),
    OTEL_TRACES_SAMPLER: Type.Optional(
      OneOf(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const, {
        description:
          "which requests are traced: always_on, always_off, traceidratio, or parentbased_ one of them (follow the caller's sampled flag); unset: parentbased_always_on",
      }),
    ),
    OTEL_TRACES_SAMPLER_ARG: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: 'the ratio of the traceidratio samplers, 0 to 1' })),
    OTEL_PROPAGATORS: Type.Optional(
      Type.String({ pattern: listOf(['tracecontext', 'baggage', 'b3', 'b3multi', 'none']), description: 'the trace headers read and sent: tracecontext, baggage, b3, b3multi, none; unset: tracecontext,baggage' }),
    ),
    OTEL_SDK_DISABLED: Type.Optional(OneOf(['true', 'false'] as const, { description: 'true: tracing off whatever else is set; unset: false' })),
  } satisfies TProperties
}

/** A host name, an IPv4 address or a bracketed IPv6 address, then a port from 1 to 65535. */
const HOST_PORT = '(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\\[[0-9A-Fa-f:.]+\\]):(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])'

/**
 * `REDIS_SENTINELS` and `REDIS_SENTINEL_NAME`: the sentinels that name the current Redis
 * primary, the alternative to `REDIS_URL` (`redisSentinels` reads them).
 */
export function sentinelSettings() {
  return {
    REDIS_SENTINELS: Type.Optional(
      Type.String({
        pattern: `^ *${HOST_PORT} *(?:, *${HOST_PORT} *)*$`,
        description:
          "instead of REDIS_URL (setting both stops the start) and, for items-list, REDIS_HOST and REDIS_PORT: comma-separated host:port of Redis Sentinels ([::1]:26379 for IPv6); the service's Redis is the primary they name, followed across failovers. A malformed entry stops the start",
      }),
    ),
    REDIS_SENTINEL_NAME: Type.String({ default: 'mymaster', pattern: '^[^\\s]+$', description: 'the name the sentinels monitor that primary under' }),
  } satisfies TProperties
}

/**
 * The sentinels to ask for the primary, or undefined when `REDIS_SENTINELS` is unset. Throws
 * `ConfigError` when `REDIS_URL` is set too: which of two Redis deployments a service writes to
 * must never be a matter of precedence.
 */
export function redisSentinels(config: {
  REDIS_URL?: string | undefined
  REDIS_SENTINELS?: string | undefined
  REDIS_SENTINEL_NAME: string
}): { sentinels: Array<{ host: string; port: number }>; name: string } | undefined {
  if (config.REDIS_SENTINELS === undefined) return undefined
  if (config.REDIS_URL !== undefined) throw new ConfigError(['REDIS_SENTINELS excludes REDIS_URL: set one of them'])
  const sentinels = config.REDIS_SENTINELS.split(',').map((entry) => {
    const address = entry.trim()
    const colon = address.lastIndexOf(':')
    return { host: address.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(address.slice(colon + 1)) }
  })
  return { sentinels, name: config.REDIS_SENTINEL_NAME }
}

/**
 * Reads the variables `schema` declares from `env`, applies defaults and coerces types.
 * An empty variable counts as unset (compose files pass `FOO=` for "not given").
 * Returns a frozen object typed by the schema; throws `ConfigError` naming every bad variable.
 */
export function loadConfig<Schema extends TObject>(
  schema: Schema,
  env: NodeJS.ProcessEnv = process.env,
): Readonly<Static<Schema>> {
  const declared: Record<string, string> = {}
  for (const name of Object.keys(schema.properties)) {
    const value = env[name]
    if (value !== undefined && value !== '') declared[name] = value
  }

  try {
    // env-schema sets `additionalProperties` on the schema it is given: hand it a copy.
    const config = envSchema<Static<Schema>>({ schema: { ...schema }, data: declared, env: false })
    return Object.freeze(trimLists(config))
  } catch (error) {
    throw new ConfigError(describeProblems(error))
  }
}

function trimLists<T extends object>(config: T): T {
  for (const [key, value] of Object.entries(config)) {
    if (Array.isArray(value)) {
      Reflect.set(config, key, value.map((entry: string) => entry.trim()).filter((entry) => entry !== ''))
    }
  }
  return config
}

interface AjvError {
  instancePath: string
  message?: string
  params: { allowedValues?: unknown[] }
}

function describeProblems(error: unknown): string[] {
  const ajvErrors = (error as { errors?: AjvError[] }).errors
  if (!Array.isArray(ajvErrors)) throw error

  const byVariable = new Map<string, string>()
  for (const { instancePath, message, params } of ajvErrors) {
    const name = instancePath.replace(/^\//, '')
    if (byVariable.has(name)) continue
    const expected = params.allowedValues ? `must be one of ${params.allowedValues.join(', ')}` : message
    byVariable.set(name, `${name} ${String(expected)}`)
  }
  return [...byVariable.values()]
}
