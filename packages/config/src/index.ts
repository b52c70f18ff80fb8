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
export function OneOf<const Values extends readonly string[]>(
  values: Values,
  options: { default?: Values[number]; description?: string } = {},
): TUnsafe<Values[number]> {
  return Type.Unsafe<Values[number]>({ type: 'string', enum: [...values], ...options })
}

/** A comma-separated variable read as a list of non-empty, trimmed entries. */
export function CommaSeparated(options: { description?: string } = {}): TUnsafe<string[]> {
  // `separator` is env-schema's own keyword: it splits the string before validation ends.
  return Type.Unsafe<string[]>({ type: 'string', separator: ',', ...options })
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

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
    LOG_LEVEL: OneOf(LOG_LEVELS, { default: 'info', description: 'pino log level' }),
    CORS_ORIGINS: Type.Optional(CommaSeparated({ description: 'allowed origins, comma-separated, or *' })),
    TRUST_PROXY: Type.Optional(
      Type.String({
        pattern: TRUST_PROXY_PATTERN,
        description: 'which proxies to believe about the client address: true, a hop count, or addresses/CIDRs; unset: none',
      }),
    ),
    RATE_LIMIT_PER_MINUTE: Type.Integer({
      default: 0,
      minimum: 0,
      description: 'requests one client address may make per minute; 0: no limit',
    }),
  } satisfies TProperties
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
