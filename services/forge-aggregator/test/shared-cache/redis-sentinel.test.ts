import t from 'tap'
import { createClient } from 'redis'
import { ConfigError, loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { renderServiceUsersAcl, startPrivateSentinelGroup, TEST_REDIS_USERS } from '@repo/test-support'
import { buildApp } from '../../src/app.ts'
import { ForgeAggregatorConfig } from '../../src/config.ts'
import { buildAggregator } from '../helpers/build.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS } from '../helpers/repository-upstream.ts'

// Not mymaster, REDIS_SENTINEL_NAME's default: a service that ignored the setting would find nothing.
const NAME = 'cache-primary'
const { forgeAggregator } = TEST_REDIS_USERS

t.test('with REDIS_SENTINELS, the shared cache is the primary the sentinels know as REDIS_SENTINEL_NAME, used as REDIS_USERNAME with REDIS_PASSWORD', async (t) => {
  const group = await startPrivateSentinelGroup({ replicas: 0, sentinels: 1, name: NAME })
  t.teardown(() => group.dispose())
  const admin = createClient({ socket: { host: '127.0.0.1', port: group.primary.port } })
  await admin.connect()
  t.teardown(() => admin.destroy())
  // The aggregator's user as deploy/redis/users.acl.template defines it, with the tests' password.
  const rules = (await renderServiceUsersAcl()).split('\n').find((line) => line.startsWith(`user ${forgeAggregator.username} `))!.split(' ').slice(1)
  await admin.sendCommand(['ACL', 'SETUSER', ...rules])

  const upstream = await startLocalUpstream(t, answerRepository('octocat'))
  const { app, logs } = await buildAggregator(t, {
    env: {
      FORGE_API_URL: upstream.url,
      REDIS_SENTINELS: group.sentinelList,
      REDIS_SENTINEL_NAME: NAME,
      REDIS_USERNAME: forgeAggregator.username,
      REDIS_PASSWORD: forgeAggregator.password,
    },
  })
  t.match(logs.lines.find((line) => line.msg === 'connecting to Redis'), { sentinels: group.sentinelList.split(','), name: NAME, username: forgeAggregator.username })
  const res = await app.inject({ url: '/api/forge/repos?repo_name=hello-world' })
  t.equal(res.statusCode, 200)
  t.equal(res.body, JSON.stringify(REPOSITORY_COUNTS))
  t.ok((await admin.keys('forge:*answer:*')).length > 0, 'the answer is stored on the primary')

  // Every connection to the primary but the test's own and the sentinel's is the aggregator's,
  // its subscriber to the production announcements among them.
  const own = await admin.clientId()
  const others = (await admin.clientList()).filter((client) => client.id !== own && !client.name.startsWith('sentinel-'))
  t.ok(others.some((client) => client.flags.includes('P')), 'a subscriber among them')
  t.same(new Set(others.map((client) => client.user)), new Set([forgeAggregator.username]))
  t.same(await admin.aclLog(), [], 'Redis refused it nothing')
})

t.test('REDIS_CA_FILE with REDIS_SENTINELS stops the start, naming it, rather than being ignored', async (t) => {
  const config = loadConfig(ForgeAggregatorConfig, { REDIS_SENTINELS: '127.0.0.1:26379', REDIS_SENTINEL_NAME: NAME, REDIS_CA_FILE: `${t.testdir({ 'ca.pem': 'not read' })}/ca.pem` })
  const outcome = await buildApp(config, { logger: createLogger('silent', { write: () => {} }) }).then(
    async (app) => app.close().then(() => 'started'),
    (error: unknown) => error,
  )
  t.ok(outcome instanceof ConfigError, 'a configuration error')
  t.same((outcome as ConfigError).problems, ['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
})
