import t from 'tap'
import { Type } from '@sinclair/typebox'
import { ConfigError, loadConfig, redisAuthSettings, redisDeadlineSettings, serverSettings } from '../src/index.ts'

const Schema = Type.Object({
  ...serverSettings({ port: 8080 }),
  API_TOKEN: Type.Optional(Type.String()),
  RETRIES: Type.Integer({ default: 3, minimum: 0, maximum: 10 }),
})

function problemsOf(env: NodeJS.ProcessEnv): readonly string[] {
  try {
    loadConfig(Schema, env)
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  throw new Error('expected loadConfig to throw')
}

t.test('unset variables take their defaults', async (t) => {
  const config = loadConfig(Schema, {})
  t.same(config, { HOST: '0.0.0.0', PORT: 8080, LOG_LEVEL: 'info', RATE_LIMIT_PER_MINUTE: 0, SHUTDOWN_DELAY_SECONDS: 5, RETRIES: 3 })
})

t.test('numeric variables are coerced to numbers', async (t) => {
  const config = loadConfig(Schema, { PORT: '3000', RETRIES: '0' })
  t.equal(config.PORT, 3000)
  t.equal(config.RETRIES, 0)
})

t.test('an empty variable counts as unset', async (t) => {
  const config = loadConfig(Schema, { PORT: '', API_TOKEN: '' })
  t.equal(config.PORT, 8080)
  t.notOk('API_TOKEN' in config)
})

t.test('CORS_ORIGINS is read as a trimmed list', async (t) => {
  const config = loadConfig(Schema, { CORS_ORIGINS: 'https://a.example, https://b.example,' })
  t.same(config.CORS_ORIGINS, ['https://a.example', 'https://b.example'])
})

t.test('TRUST_PROXY is off and RATE_LIMIT_PER_MINUTE is 0 (no limit) unless set', async (t) => {
  const config = loadConfig(Schema, {})
  t.notOk('TRUST_PROXY' in config)
  t.equal(config.RATE_LIMIT_PER_MINUTE, 0)
})

t.test('TRUST_PROXY takes true, a hop count or a list of addresses and CIDRs, and nothing else', async (t) => {
  for (const value of ['true', '2', '10.0.0.0/8, 127.0.0.1', 'loopback,::1']) {
    t.equal(loadConfig(Schema, { TRUST_PROXY: value }).TRUST_PROXY, value, value)
  }
  t.same(problemsOf({ TRUST_PROXY: '10.0.0.1; rm' }), ['TRUST_PROXY must match pattern "^[0-9A-Za-z.:/]+( *, *[0-9A-Za-z.:/]+)*$"'])
})

t.test('RATE_LIMIT_PER_MINUTE is a count of requests, not a negative one', async (t) => {
  t.equal(loadConfig(Schema, { RATE_LIMIT_PER_MINUTE: '120' }).RATE_LIMIT_PER_MINUTE, 120)
  t.same(problemsOf({ RATE_LIMIT_PER_MINUTE: '-1' }), ['RATE_LIMIT_PER_MINUTE must be >= 0'])
})

t.test('SHUTDOWN_DELAY_SECONDS is 5 s unless set, 0 included, and never negative or fractional', async (t) => {
  t.equal(loadConfig(Schema, {}).SHUTDOWN_DELAY_SECONDS, 5)
  t.equal(loadConfig(Schema, { SHUTDOWN_DELAY_SECONDS: '0' }).SHUTDOWN_DELAY_SECONDS, 0)
  t.same(problemsOf({ SHUTDOWN_DELAY_SECONDS: '-1' }), ['SHUTDOWN_DELAY_SECONDS must be >= 0'])
  t.same(problemsOf({ SHUTDOWN_DELAY_SECONDS: '1.5' }), ['SHUTDOWN_DELAY_SECONDS must be integer'])
})

t.test('variables the schema does not declare are ignored', async (t) => {
  const config = loadConfig(Schema, { PATH: '/usr/bin', HOME: '/root' })
  t.notOk('PATH' in config)
})

t.test('the returned configuration is frozen', async (t) => {
  const config = loadConfig(Schema, {})
  t.ok(Object.isFrozen(config))
})

t.test('every invalid variable is named on its own line', async (t) => {
  const problems = problemsOf({ PORT: 'eighty', LOG_LEVEL: 'loud', RETRIES: '11' })
  t.same(problems, [
    'PORT must be integer',
    'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent',
    'RETRIES must be <= 10',
  ])
})

t.test('a fractional number is rejected, not truncated', async (t) => {
  t.same(problemsOf({ PORT: '80.5' }), ['PORT must be integer'])
})

t.test('the error message never contains the offending values', async (t) => {
  const secret = 'ghp_supersecretvalue'
  const error = t.throws(() => loadConfig(Type.Object({ API_TOKEN: Type.String({ minLength: 64 }) }), { API_TOKEN: secret }))
  t.type(error, ConfigError)
  t.match((error as Error).message, /API_TOKEN must NOT have fewer than 64 characters/)
  t.notMatch((error as Error).message, secret)
})

t.test('the message lists every problem under one heading', async (t) => {
  const error = t.throws(() => loadConfig(Schema, { PORT: '-1', RETRIES: 'x' })) as Error
  t.equal(error.message, 'Invalid configuration:\n  PORT must be >= 0\n  RETRIES must be integer')
})

t.test('a variable breaking several rules gets one line', async (t) => {
  const Strict = Type.Object({ REGION: Type.String({ minLength: 4, pattern: '^eu-' }) })
  const error = t.throws(() => loadConfig(Strict, { REGION: 'us' })) as ConfigError
  t.same(error.problems, ['REGION must NOT have fewer than 4 characters'])
})

t.test('a schema the validator cannot compile is rethrown, not reported as bad input', async (t) => {
  const Broken = Type.Object({ X: Type.Unsafe<string>({ type: 'no-such-type' }) })
  const error = t.throws(() => loadConfig(Broken, { X: '1' }))
  t.notOk(error instanceof ConfigError)
})

t.test('the Redis credentials: a user, a password and a CA file, each optional; an empty one counts as unset', async (t) => {
  const RedisSchema = Type.Object(redisAuthSettings())
  t.same(loadConfig(RedisSchema, {}), {})
  t.same(loadConfig(RedisSchema, { REDIS_USERNAME: 'items-list', REDIS_PASSWORD: 'hunter2', REDIS_CA_FILE: '/etc/ca.pem' }), {
    REDIS_USERNAME: 'items-list',
    REDIS_PASSWORD: 'hunter2',
    REDIS_CA_FILE: '/etc/ca.pem',
  })
  t.same(loadConfig(RedisSchema, { REDIS_USERNAME: '', REDIS_CA_FILE: '' }), {})
})

t.test('the Redis command deadline: 500 ms unless set, from 10 ms to a minute', async (t) => {
  const DeadlineSchema = Type.Object(redisDeadlineSettings())
  t.same(loadConfig(DeadlineSchema, {}), { REDIS_DEADLINE_MS: 500 })
  t.same(loadConfig(DeadlineSchema, { REDIS_DEADLINE_MS: '5000' }), { REDIS_DEADLINE_MS: 5000 })
  for (const value of ['9', '60001', '1.5', 'soon']) {
    const error = t.throws(() => loadConfig(DeadlineSchema, { REDIS_DEADLINE_MS: value })) as ConfigError
    t.match(error.problems, [/^REDIS_DEADLINE_MS /], `${value} is refused`)
  }
})
