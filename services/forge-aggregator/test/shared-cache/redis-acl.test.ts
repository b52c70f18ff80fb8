import t from 'tap'
import nock from 'nock'
import { createClient } from 'redis'
import { eventually, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS } from '@repo/test-support'
import { buildAggregator, testClock } from '../helpers/build.ts'
import { pingsAnswered, untilWaitingOnAnotherReplica } from '../helpers/shared-redis.ts'
import { mockHeldUser, recordUnexpectedCalls } from '../helpers/upstream.ts'

// Redis as compose and the Kubernetes base run it: the users of deploy/redis/users.acl.template.
const redis = await startRedisWithServiceUsers({ durable: false })
t.teardown(() => redis.dispose())
const admin = await createClient({ socket: { host: '127.0.0.1', port: redis.port }, ...TEST_REDIS_ADMIN }).connect()
t.teardown(() => admin.destroy())
t.afterEach(async () => {
  nock.cleanAll()
  await admin.flushAll()
  await admin.aclLogReset()
})

const { forgeAggregator } = TEST_REDIS_USERS
const env = {
  REDIS_URL: `redis://127.0.0.1:${redis.port}`,
  REDIS_USERNAME: forgeAggregator.username,
  REDIS_PASSWORD: forgeAggregator.password,
  RATE_LIMIT_PER_MINUTE: 1_000,
}

/** What Redis refused to whom since the last reset (ACL LOG). */
async function denials(): Promise<string[]> {
  return (await admin.aclLog()).map((entry) => `${entry.username}: ${entry.reason} ${entry.object}`)
}

t.test('the aggregator works under its own ACL user: shared answers, the production lock and its announcements, the rate limit; Redis denies it nothing', async (t) => {
  const clock = testClock()
  const [one, two, three] = await Promise.all([1, 2, 3].map(() => buildAggregator(t, { clock, env })))
  const unexpected = recordUnexpectedCalls(t)
  // The production is held until the other replica is seen waiting on it.
  const scope = mockHeldUser('mona', untilWaitingOnAnotherReplica(admin, await pingsAnswered(admin)))
  const answers = await Promise.all(Array.from({ length: 30 }, (_, index) => [one, two][index % 2]!.app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })))
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]))
  scope.done()
  t.same(unexpected, [], 'one production for both replicas: the lock and its announcements work')
  t.ok(new Set(answers.map((res) => res.headers['cache-status'])).has('forge-aggregator; fwd=miss; collapsed'), 'a replica waited on the other’s production')

  t.ok(await eventually(async () => (await admin.keys('forge:*answer:users/mona')).length === 1), 'the answer is stored under forge:')
  const third = await three!.app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  t.equal(third.headers['cache-status'], 'forge-aggregator; hit; ttl=60', 'read back by a third replica')
  t.ok((await admin.keys('rate-limit:forge-aggregator:*')).length > 0, 'requests counted in Redis')
  t.same(await denials(), [], 'no command, key or channel refused')
})

t.test('the aggregator’s user may not run @dangerous commands: FLUSHALL, FLUSHDB, CONFIG, KEYS, SHUTDOWN, ACL, MONITOR', async (t) => {
  await admin.set('forge:still-here', 'yes')
  const client = await createClient({ socket: { host: '127.0.0.1', port: redis.port }, ...forgeAggregator }).connect()
  t.teardown(() => client.destroy())
  for (const command of [['FLUSHALL'], ['FLUSHDB'], ['CONFIG', 'SET', 'maxmemory', '1'], ['KEYS', 'forge:*'], ['SHUTDOWN', 'NOSAVE'], ['ACL', 'LIST'], ['MONITOR']]) {
    await t.rejects(client.sendCommand(command), /NOPERM/, command.join(' '))
  }
  t.equal(await admin.get('forge:still-here'), 'yes', 'nothing was flushed')
  t.same(await admin.configGet('maxmemory'), { maxmemory: '0' }, 'nothing was configured')
})

t.test('the ACL file gives the aggregator exactly its forge: keys and channels and its rate-limit counts, and the commands it sends', async (t) => {
  const user = await admin.aclGetUser(forgeAggregator.username)
  if (!user) throw new Error('no ACL user forge-aggregator')
  const dangerous = new Set(await admin.aclCat('dangerous'))
  // Redis lists the rules in an order of its own.
  const commands = String(user.commands).split(' ').toSorted()
  t.match(user.flags, ['on'])
  t.equal(user.passwords.length, 1, 'one password, stored hashed')
  t.equal(String(user.keys), '~forge:* ~rate-limit:forge-aggregator:*')
  t.equal(String(user.channels), '&forge:*')
  t.same(commands, ['-@all', '+ping', '+get', '+set', '+del', '+eval', '+incr', '+pexpire', '+pttl', '+publish', '+subscribe', '+exists'].toSorted())
  t.same(commands.filter((rule) => rule.startsWith('+') && dangerous.has(rule.slice(1))), [], 'no @dangerous command')
})
