import t from 'tap'
import { Type } from '@sinclair/typebox'
import { ConfigError, loadConfig, redisSentinels, sentinelSettings } from '../src/index.ts'

const Schema = Type.Object({ REDIS_URL: Type.Optional(Type.String()), ...sentinelSettings() })

function problemsOf(env: NodeJS.ProcessEnv): readonly string[] {
  const error = t.throws(() => loadConfig(Schema, env))
  return (error as ConfigError).problems
}

t.test('REDIS_SENTINELS is unset and REDIS_SENTINEL_NAME is mymaster by default: no sentinels', async (t) => {
  const config = loadConfig(Schema, {})
  t.same(config, { REDIS_SENTINEL_NAME: 'mymaster' })
  t.equal(redisSentinels(config), undefined)
})

t.test('REDIS_SENTINELS reads comma-separated host:port entries: names, IPv4 and bracketed IPv6, spaces around commas', async (t) => {
  const config = loadConfig(Schema, { REDIS_SENTINELS: 'sentinel-0.redis:26379, 10.0.0.7:26380 ,[::1]:65535', REDIS_SENTINEL_NAME: 'items' })
  t.same(redisSentinels(config), {
    sentinels: [
      { host: 'sentinel-0.redis', port: 26379 },
      { host: '10.0.0.7', port: 26380 },
      { host: '::1', port: 65535 },
    ],
    name: 'items',
  })
})

for (const bad of ['sentinel', 'sentinel:', 'sentinel:0', 'sentinel:65536', 'a:1,', 'a:1,,b:2', ':26379', 'a b:1', 'redis://a:1', '::1:26379']) {
  t.test(`a bad REDIS_SENTINELS (${bad}) is a start-up error naming it`, async (t) => {
    const problems = problemsOf({ REDIS_SENTINELS: bad })
    t.equal(problems.length, 1)
    t.match(problems[0], /^REDIS_SENTINELS must match pattern/)
  })
}

t.test('REDIS_SENTINEL_NAME must be one word', async (t) => {
  t.match(problemsOf({ REDIS_SENTINEL_NAME: 'my master' }), [/^REDIS_SENTINEL_NAME must match pattern/])
})

t.test('REDIS_SENTINELS with REDIS_URL is a start-up error naming both', async (t) => {
  const config = loadConfig(Schema, { REDIS_SENTINELS: 'a:26379', REDIS_URL: 'redis://redis:6379' })
  const error = t.throws(() => redisSentinels(config))
  t.ok(error instanceof ConfigError)
  t.same((error as ConfigError).problems, ['REDIS_SENTINELS excludes REDIS_URL: set one of them'])
})
