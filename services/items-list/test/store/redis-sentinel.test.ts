import t from 'tap'
import { createClient } from 'redis'
import { ConfigError, loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { renderServiceUsersAcl, startPrivateSentinelGroup, TEST_REDIS_USERS } from '@repo/test-support'
import { buildApp } from '../../src/app.ts'
import { ItemsListConfig } from '../../src/config.ts'
import { buildService, storedList } from '../helpers/service.ts'

// Not mymaster, REDIS_SENTINEL_NAME's default: a service that ignored the setting would find nothing.
const NAME = 'items-primary'
const { itemsList } = TEST_REDIS_USERS

t.test('with REDIS_SENTINELS, items-list works on the primary the sentinels know as REDIS_SENTINEL_NAME, logged in as REDIS_USERNAME with REDIS_PASSWORD', async (t) => {
  const group = await startPrivateSentinelGroup({ replicas: 1, sentinels: 1, name: NAME })
  t.teardown(() => group.dispose())
  const admin = createClient({ socket: { host: '127.0.0.1', port: group.primary.port } })
  await admin.connect()
  t.teardown(() => admin.destroy())
  // items-list's user as deploy/redis/users.acl.template defines it, with the tests' password.
  const rules = (await renderServiceUsersAcl()).split('\n').find((line) => line.startsWith(`user ${itemsList.username} `))!.split(' ').slice(1)
  await admin.sendCommand(['ACL', 'SETUSER', ...rules])

  const { app, logs } = await buildService(t, {
    redis: group.primary,
    env: {
      REDIS_SENTINELS: group.sentinelList,
      REDIS_SENTINEL_NAME: NAME,
      REDIS_USERNAME: itemsList.username,
      REDIS_PASSWORD: itemsList.password,
      ITEMS_MIN_REPLICAS_ACK: '1',
    },
  })
  t.match(logs.lines.find((line) => line.msg === 'connecting to Redis'), { sentinels: group.sentinelList.split(','), name: NAME, username: itemsList.username })
  t.equal((await app.inject({ method: 'POST', url: '/items', headers: { 'idempotency-key': 'sentinel-1' }, payload: { name: 'apricot' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items' })).json(), { items: ['apricot'] })
  t.same(await storedList(admin, 'items'), ['apricot'], 'on the primary')

  // Every connection to the primary but the test's own, the replica's and the sentinel's is
  // items-list's: two each for its store and its appends (one for their commands, one for the
  // exclusive leases of acknowledged appends), and the helper's inspector (which logs in as the app does).
  const own = await admin.clientId()
  const others = (await admin.clientList()).filter((client) => client.id !== own && !client.flags.includes('S') && !client.name.startsWith('sentinel-'))
  t.same(
    others.map((client) => client.user),
    Array(5).fill(itemsList.username),
  )
  t.same(await admin.aclLog(), [], 'Redis refused it nothing')
})

t.test('REDIS_CA_FILE with REDIS_SENTINELS stops the start, naming it, rather than being ignored', async (t) => {
  const config = loadConfig(ItemsListConfig, { REDIS_SENTINELS: '127.0.0.1:26379', REDIS_SENTINEL_NAME: NAME, REDIS_CA_FILE: `${t.testdir({ 'ca.pem': 'not read' })}/ca.pem` })
  const outcome = await buildApp(config, { logger: createLogger('silent', { write: () => {} }) }).then(
    async (app) => app.close().then(() => 'started'),
    (error: unknown) => error,
  )
  t.ok(outcome instanceof ConfigError, 'a configuration error')
  t.same((outcome as ConfigError).problems, ['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
})
