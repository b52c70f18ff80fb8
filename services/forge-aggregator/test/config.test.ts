import t from 'tap'
import { ConfigError, loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { rootStartEnv } from '@repo/test-support'
import { buildApp } from '../src/app.ts'
import { ForgeAggregatorConfig } from '../src/config.ts'

t.test('defaults: port 3000, api.github.com, octocat, no token, 10 s, 60 s, 30 followers, 10 pages, a day stale, 10% reserve, no Redis', async (t) => {
  t.same(loadConfig(ForgeAggregatorConfig, {}), {
    HOST: '0.0.0.0',
    PORT: 3000,
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_MINUTE: 0,
    SHUTDOWN_DELAY_SECONDS: 5,
    FORGE_API_URL: 'https://api.github.com',
    FORGE_DEFAULT_USER: 'octocat',
    FORGE_TIMEOUT_MS: 10_000,
    FORGE_CACHE_TTL_SECONDS: 60,
    FORGE_CACHE_MAX_MB: 64,
    FORGE_FOLLOWERS_LIMIT: 30,
    FORGE_MAX_REPO_PAGES: 10,
    FORGE_STALE_SECONDS: 86_400,
    FORGE_BUDGET_RESERVE: 0.1,
    FORGE_APP_PUBLIC: false,
    REDIS_DEADLINE_MS: 500,
    REDIS_SENTINEL_NAME: 'mymaster',
  })
})

t.test('REDIS_SENTINELS with REDIS_URL stops the start, naming both', async (t) => {
  const config = loadConfig(ForgeAggregatorConfig, { REDIS_URL: 'redis://cache:6379', REDIS_SENTINELS: 'sentinel-0:26379' })
  await t.rejects(buildApp(config, { logger: createLogger('silent', { write: () => {} }) }), new ConfigError(['REDIS_SENTINELS excludes REDIS_URL: set one of them']))
})

t.test('REDIS_SENTINELS takes comma-separated host:port entries and names itself when bad', async (t) => {
  t.equal(loadConfig(ForgeAggregatorConfig, { REDIS_SENTINELS: 'sentinel-0:26379,10.0.0.2:26379' }).REDIS_SENTINELS, 'sentinel-0:26379,10.0.0.2:26379')
  const error = t.throws(() => loadConfig(ForgeAggregatorConfig, { REDIS_SENTINELS: 'sentinel-0:263790' }))
  t.match((error as ConfigError).problems, [/^REDIS_SENTINELS /])
})

t.test('REDIS_URL takes redis:// and rediss:// URLs; the stale window and the reserve are bounded', async (t) => {
  t.equal(loadConfig(ForgeAggregatorConfig, { REDIS_URL: 'rediss://:secret@cache.internal:6380/2' }).REDIS_URL, 'rediss://:secret@cache.internal:6380/2')
  const config = loadConfig(ForgeAggregatorConfig, { FORGE_STALE_SECONDS: '0', FORGE_BUDGET_RESERVE: '0.25' })
  t.equal(config.FORGE_STALE_SECONDS, 0)
  t.equal(config.FORGE_BUDGET_RESERVE, 0.25)
  const error = t.throws(() =>
    loadConfig(ForgeAggregatorConfig, { REDIS_URL: 'http://:secret@cache', FORGE_STALE_SECONDS: '-1', FORGE_BUDGET_RESERVE: '1.5' }),
  ) as ConfigError
  t.same(error.problems.map((line) => line.split(' ')[0]).sort(), ['FORGE_BUDGET_RESERVE', 'FORGE_STALE_SECONDS', 'REDIS_URL'])
  t.notMatch(error.message, 'secret')
})

t.test('REDIS_USERNAME, REDIS_PASSWORD and REDIS_CA_FILE are read; an empty REDIS_USERNAME counts as none', async (t) => {
  const config = loadConfig(ForgeAggregatorConfig, { REDIS_URL: 'rediss://cache:6380', REDIS_USERNAME: 'forge-aggregator', REDIS_PASSWORD: 'hunter2', REDIS_CA_FILE: '/etc/redis-ca/ca.pem' })
  t.match(config, { REDIS_USERNAME: 'forge-aggregator', REDIS_PASSWORD: 'hunter2', REDIS_CA_FILE: '/etc/redis-ca/ca.pem' })
  t.notOk('REDIS_USERNAME' in loadConfig(ForgeAggregatorConfig, { REDIS_USERNAME: '' }))
})

t.test('a GitHub Enterprise URL and a token are accepted; an empty token counts as none', async (t) => {
  const config = loadConfig(ForgeAggregatorConfig, { FORGE_API_URL: 'https://ghe.example.com/api/v3', FORGE_TOKEN: 'ghp_x' })
  t.equal(config.FORGE_API_URL, 'https://ghe.example.com/api/v3')
  t.equal(config.FORGE_TOKEN, 'ghp_x')
  t.notOk('FORGE_TOKEN' in loadConfig(ForgeAggregatorConfig, { FORGE_TOKEN: '' }))
})

t.test('every bad variable is named, the token never shown', async (t) => {
  const error = t.throws(() =>
    loadConfig(ForgeAggregatorConfig, {
      FORGE_API_URL: 'ftp://example.com',
      FORGE_DEFAULT_USER: 'not a login',
      FORGE_FOLLOWERS_LIMIT: '101',
      FORGE_MAX_REPO_PAGES: '0',
      FORGE_CACHE_TTL_SECONDS: '-1',
      FORGE_TIMEOUT_MS: 'soon',
      FORGE_TOKEN: 'ghp_secret',
    }),
  ) as ConfigError
  t.type(error, ConfigError)
  t.same(
    error.problems.map((line) => line.split(' ')[0]),
    ['FORGE_API_URL', 'FORGE_DEFAULT_USER', 'FORGE_TIMEOUT_MS', 'FORGE_CACHE_TTL_SECONDS', 'FORGE_FOLLOWERS_LIMIT', 'FORGE_MAX_REPO_PAGES'],
  )
  t.notMatch(error.message, 'ghp_secret')
})

t.test('every variable it reads reaches it through `pnpm start` at the repository root', async (t) => {
  const passed = new Set(await rootStartEnv())
  t.same(
    Object.keys(ForgeAggregatorConfig.properties).filter((name) => !passed.has(name)),
    [],
    'turbo.json lists each in the start task\'s passThroughEnv',
  )
})
