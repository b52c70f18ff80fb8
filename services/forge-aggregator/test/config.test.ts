import t from 'tap'
import { ConfigError, loadConfig } from '@repo/config'
import { ForgeAggregatorConfig } from '../src/config.ts'

t.test('defaults: port 3000, api.github.com, octocat, no token, 10 s, 60 s, 30 followers, 10 pages', async (t) => {
  t.same(loadConfig(ForgeAggregatorConfig, {}), {
    HOST: '0.0.0.0',
    PORT: 3000,
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_MINUTE: 0,
    FORGE_API_URL: 'https://api.github.com',
    FORGE_DEFAULT_USER: 'octocat',
    FORGE_TIMEOUT_MS: 10_000,
    FORGE_CACHE_TTL_SECONDS: 60,
    FORGE_CACHE_MAX_MB: 64,
    FORGE_FOLLOWERS_LIMIT: 30,
    FORGE_MAX_REPO_PAGES: 10,
  })
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
