import t from 'tap'
import { ConfigError, loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { rootStartEnv } from '@repo/test-support'
import { buildApp } from '../src/app.ts'
import { ItemsListConfig } from '../src/config.ts'

t.test('defaults: port 8080 on all interfaces, Redis at localhost:6379 db 0, key items', async (t) => {
  t.same(loadConfig(ItemsListConfig, {}), {
    HOST: '0.0.0.0',
    PORT: 8080,
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_MINUTE: 0,
    SHUTDOWN_DELAY_SECONDS: 5,
    REDIS_HOST: 'localhost',
    REDIS_PORT: 6379,
    REDIS_DB: 0,
    REDIS_DEADLINE_MS: 500,
    REDIS_SENTINEL_NAME: 'mymaster',
    ITEMS_KEY: 'items',
    ITEMS_MAX_COUNT: 1_000_000,
    IDEMPOTENCY_TTL_SECONDS: 86_400,
    ITEMS_MIN_REPLICAS_ACK: 0,
    ITEMS_EVENTS_KEPT: 100_000,
    ITEMS_EVENTS_BUFFER_BYTES: 1_048_576,
    ITEMS_EVENTS_MAX_STREAMS: 10_000,
  })
})

t.test('every variable of docs/configuration.md is read', async (t) => {
  const config = loadConfig(ItemsListConfig, {
    HOST: '127.0.0.1',
    PORT: '9000',
    LOG_LEVEL: 'debug',
    CORS_ORIGINS: 'https://a.example,https://b.example',
    TRUST_PROXY: '10.0.0.0/8',
    RATE_LIMIT_PER_MINUTE: '600',
    SHUTDOWN_DELAY_SECONDS: '2',
    REDIS_URL: 'rediss://:pw@redis.example:6390/4',
    REDIS_HOST: 'redis',
    REDIS_PORT: '6380',
    REDIS_USERNAME: 'items-list',
    REDIS_PASSWORD: 'hunter2',
    REDIS_CA_FILE: '/etc/redis-ca/ca.pem',
    REDIS_DEADLINE_MS: '2000',
    REDIS_DB: '3',
    REDIS_SENTINELS: 'sentinel-0:26379,sentinel-1:26379',
    REDIS_SENTINEL_NAME: 'items',
    ITEMS_KEY: 'shopping',
    ITEMS_MAX_COUNT: '5000',
    IDEMPOTENCY_TTL_SECONDS: '3600',
    ITEMS_MIN_REPLICAS_ACK: '1',
    ITEMS_EVENTS_KEPT: '500',
    ITEMS_EVENTS_BUFFER_BYTES: '65536',
    ITEMS_EVENTS_MAX_STREAMS: '20',
  })
  t.same(config, {
    HOST: '127.0.0.1',
    PORT: 9000,
    LOG_LEVEL: 'debug',
    CORS_ORIGINS: ['https://a.example', 'https://b.example'],
    TRUST_PROXY: '10.0.0.0/8',
    RATE_LIMIT_PER_MINUTE: 600,
    SHUTDOWN_DELAY_SECONDS: 2,
    REDIS_URL: 'rediss://:pw@redis.example:6390/4',
    REDIS_HOST: 'redis',
    REDIS_PORT: 6380,
    REDIS_USERNAME: 'items-list',
    REDIS_PASSWORD: 'hunter2',
    REDIS_CA_FILE: '/etc/redis-ca/ca.pem',
    REDIS_DEADLINE_MS: 2000,
    REDIS_DB: 3,
    REDIS_SENTINELS: 'sentinel-0:26379,sentinel-1:26379',
    REDIS_SENTINEL_NAME: 'items',
    ITEMS_KEY: 'shopping',
    ITEMS_MAX_COUNT: 5000,
    IDEMPOTENCY_TTL_SECONDS: 3600,
    ITEMS_MIN_REPLICAS_ACK: 1,
    ITEMS_EVENTS_KEPT: 500,
    ITEMS_EVENTS_BUFFER_BYTES: 65_536,
    ITEMS_EVENTS_MAX_STREAMS: 20,
  })
})

t.test('REDIS_URL must be a redis:// or rediss:// URL; IDEMPOTENCY_TTL_SECONDS at least 1', async (t) => {
  const error = t.throws(() => loadConfig(ItemsListConfig, { REDIS_URL: 'http://:secret@redis', IDEMPOTENCY_TTL_SECONDS: '0' }))
  t.same((error as ConfigError).problems, ['REDIS_URL must match pattern "^rediss?://"', 'IDEMPOTENCY_TTL_SECONDS must be >= 1'])
  t.notMatch((error as Error).message, 'secret')
})

t.test('a bad REDIS_PORT is named, and the password never printed', async (t) => {
  const error = t.throws(() => loadConfig(ItemsListConfig, { REDIS_PORT: '70000', REDIS_PASSWORD: 'hunter2', REDIS_DB: '-1' }))
  t.type(error, ConfigError)
  t.same((error as ConfigError).problems, ['REDIS_PORT must be <= 65535', 'REDIS_DB must be >= 0'])
  t.notMatch((error as Error).message, 'hunter2')
})

t.test('ITEMS_MIN_REPLICAS_ACK is a whole number of replicas, 0 or more; a bad REDIS_SENTINELS is named', async (t) => {
  const error = t.throws(() => loadConfig(ItemsListConfig, { ITEMS_MIN_REPLICAS_ACK: '-1', REDIS_SENTINELS: 'sentinel-0' }))
  t.same((error as ConfigError).problems.map((line) => line.split(' ')[0]), ['REDIS_SENTINELS', 'ITEMS_MIN_REPLICAS_ACK'])
  t.throws(() => loadConfig(ItemsListConfig, { ITEMS_MIN_REPLICAS_ACK: '1.5' }), ConfigError)
})

t.test('REDIS_SENTINELS with REDIS_URL stops the start, naming both', async (t) => {
  const config = loadConfig(ItemsListConfig, { REDIS_URL: 'redis://redis:6379', REDIS_SENTINELS: 'sentinel-0:26379' })
  await t.rejects(buildApp(config, { logger: createLogger('silent', { write: () => {} }) }), new ConfigError(['REDIS_SENTINELS excludes REDIS_URL: set one of them']))
})

t.test('every variable it reads reaches it through `pnpm start` at the repository root', async (t) => {
  const passed = new Set(await rootStartEnv())
  t.same(
    Object.keys(ItemsListConfig.properties).filter((name) => !passed.has(name)),
    [],
    'turbo.json lists each in the start task\'s passThroughEnv',
  )
})

t.test("the change feed's bounds: ITEMS_EVENTS_KEPT at least 100, ITEMS_EVENTS_BUFFER_BYTES at least 1024, ITEMS_EVENTS_MAX_STREAMS at least 1", async (t) => {
  const error = t.throws(() => loadConfig(ItemsListConfig, { ITEMS_EVENTS_KEPT: '99', ITEMS_EVENTS_BUFFER_BYTES: '1000', ITEMS_EVENTS_MAX_STREAMS: '0' }))
  t.same((error as ConfigError).problems, ['ITEMS_EVENTS_KEPT must be >= 100', 'ITEMS_EVENTS_BUFFER_BYTES must be >= 1024', 'ITEMS_EVENTS_MAX_STREAMS must be >= 1'])
})
