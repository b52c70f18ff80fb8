import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { answerWithoutLogin, startPrivateRedis, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS } from '@repo/test-support'
import { buildService, storedList, clearList } from '../helpers/service.ts'

// Redis as compose and the Kubernetes base run it: the users of deploy/redis/users.acl.template.
const redis = await startRedisWithServiceUsers()
t.teardown(() => redis.dispose())

/** A plain client logged in as `user` (none: as a caller that has not logged in). */
async function clientAs(t: Test, user?: { username: string; password: string }) {
  const client = createClient({ socket: { host: '127.0.0.1', port: redis.port, reconnectStrategy: false }, ...user })
  await client.connect()
  t.teardown(() => client.destroy())
  return client
}

const admin = await createClient({ socket: { host: '127.0.0.1', port: redis.port }, ...TEST_REDIS_ADMIN }).connect()
t.teardown(() => admin.destroy())

const { itemsList, forgeAggregator } = TEST_REDIS_USERS
const asItemsList = { REDIS_USERNAME: itemsList.username, REDIS_PASSWORD: itemsList.password }

/** What Redis refused to whom since the last reset (ACL LOG). */
async function denials(): Promise<string[]> {
  const entries = await admin.aclLog()
  return entries.map((entry) => `${entry.username}: ${entry.reason} ${entry.object}`)
}

t.beforeEach(async () => {
  await admin.aclLogReset()
})

t.test('items-list works under its own ACL user: append (once, with Idempotency-Key), list, delete, rate limit; Redis denies it nothing', async (t) => {
  const { app, storedItems } = await buildService(t, { redis, env: { ...asItemsList, RATE_LIMIT_PER_MINUTE: '100' } })
  const post = () => app.inject({ method: 'POST', url: '/items', headers: { 'idempotency-key': 'acl-1' }, payload: { name: 'apple' } })
  t.equal((await post()).statusCode, 201)
  const replayed = await post()
  t.equal(replayed.statusCode, 201)
  t.equal(replayed.headers['idempotent-replayed'], 'true')
  t.equal((await app.inject({ method: 'POST', url: '/items', payload: { name: 'pear' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items' })).json(), { items: ['apple', 'pear'] })
  t.equal((await app.inject({ method: 'DELETE', url: '/items/apple' })).statusCode, 200)
  t.same(await storedItems(), ['pear'])
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  t.ok((await admin.keys('rate-limit:items-list:*')).length > 0, 'requests counted in Redis')
  // The reset, and the scan for chunks left without index and header before a list is made.
  t.equal(await app.itemStore.reset(), 1)
  await admin.del(['items', 'items:header'])
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  t.equal((await app.inject({ method: 'POST', url: '/items', payload: { name: 'fig' } })).statusCode, 201)
  t.same(await storedItems(), ['fig'])
  t.same(await denials(), [], 'no command, key or channel refused')
})

t.test('with ITEMS_MIN_REPLICAS_ACK, items-list waits for replicas under its own ACL user: appends are answered 201 once a replica holds them, and Redis denies it nothing', async (t) => {
  // The replica logs in as the tests' admin: replication is no service's business.
  const replica = await startPrivateRedis({
    durable: false,
    args: ['--replicaof', '127.0.0.1', String(redis.port), '--masteruser', TEST_REDIS_ADMIN.username, '--masterauth', TEST_REDIS_ADMIN.password],
  })
  t.teardown(() => replica.dispose())
  await admin.set('replica-streaming', '1')
  t.equal(await admin.wait(1, 15_000), 1, 'the primary streams to its replica')
  const onReplica = createClient({ socket: { host: '127.0.0.1', port: replica.port } })
  await onReplica.connect()
  t.teardown(() => onReplica.destroy())

  const { app } = await buildService(t, { redis, env: { ...asItemsList, ITEMS_MIN_REPLICAS_ACK: '1' } })
  await clearList(admin, 'items')
  // A replica that confirms after the WAIT's 250 ms (a loaded machine) makes the append a 503,
  // which a client retries with its key, as clients are told to: at most a few times here.
  const append = async (name: string) => {
    let status = 0
    for (let attempt = 0; attempt < 5 && status !== 201; attempt++) {
      status = (await app.inject({ method: 'POST', url: '/items', headers: { 'idempotency-key': `acl-wait-${name}` }, payload: { name } })).statusCode
    }
    return status
  }
  t.equal(await append('plum'), 201)
  t.equal(await append('quince'), 201)
  t.same(await storedList(onReplica, 'items'), ['plum', 'quince'], 'on the replica when answered, once each')
  t.same(await denials(), [], 'no command refused, WAIT included')
})

t.test('items-list’s user is refused (NOPERM) on the aggregator’s keys and channels, and on any other key', async (t) => {
  const client = await clientAs(t, itemsList)
  await t.rejects(client.get('forge:1:namespace:answer:users/mona'), /NOPERM/)
  await t.rejects(client.set('forge:1:namespace:lock:users/mona', 'x'), /NOPERM/)
  await t.rejects(client.eval("return redis.call('INCR', KEYS[1])", { keys: ['rate-limit:forge-aggregator:127.0.0.1'] }), /NOPERM/)
  await t.rejects(client.publish('forge:1:namespace:released', 'users/mona'), /NOPERM/)
  await t.rejects(client.get('another-list'), /NOPERM/)
})

t.test('items-list’s user may not run @dangerous commands: FLUSHALL, FLUSHDB, CONFIG, KEYS, SHUTDOWN, ACL, MONITOR', async (t) => {
  await admin.set('still-here', 'yes')
  const client = await clientAs(t, itemsList)
  for (const command of [['FLUSHALL'], ['FLUSHDB'], ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'], ['KEYS', '*'], ['SHUTDOWN', 'NOSAVE'], ['ACL', 'LIST'], ['MONITOR']]) {
    await t.rejects(client.sendCommand(command), /NOPERM/, command.join(' '))
  }
  t.equal(await admin.get('still-here'), 'yes', 'nothing was flushed')
  t.same(await admin.configGet('maxmemory-policy'), { 'maxmemory-policy': 'noeviction' }, 'nothing was configured')
})

t.test('the aggregator’s user is refused (NOPERM) on the items list, its idempotency records and items-list’s rate-limit counts', async (t) => {
  await admin.del('items')
  await admin.rPush('items', 'kept')
  const client = await clientAs(t, forgeAggregator)
  await t.rejects(client.get('items'), /NOPERM/)
  await t.rejects(client.del('items'), /NOPERM/)
  await t.rejects(client.set('items:idempotency:acl-1', 'forged'), /NOPERM/)
  await t.rejects(client.eval("return redis.call('DEL', KEYS[1])", { keys: ['items'] }), /NOPERM/)
  await t.rejects(client.eval("return redis.call('INCR', KEYS[1])", { keys: ['rate-limit:items-list:127.0.0.1'] }), /NOPERM/)
  await t.rejects(client.sendCommand(['FLUSHALL']), /NOPERM/)
  t.same(await admin.lRange('items', 0, -1), ['kept'])
})

t.test('a client that has not logged in can run nothing, not even PING; the health checks log in as healthcheck, with any password, and may only PING', async (t) => {
  for (const command of ['PING', 'GET items', 'FLUSHALL']) t.match(await answerWithoutLogin(redis.port, command), /^-NOAUTH/, command)
  await t.rejects(clientAs(t), /NOAUTH/, 'a client library that has not logged in is refused at its handshake')
  await t.rejects(clientAs(t, { username: 'default', password: 'anything' }), /WRONGPASS/, 'nobody can log in as the default user')

  const healthCheck = await clientAs(t, { username: 'healthcheck', password: 'anything' })
  t.equal(await healthCheck.ping(), 'PONG')
  await t.rejects(healthCheck.get('items'), /NOPERM/)
  await t.rejects(healthCheck.sendCommand(['FLUSHALL']), /NOPERM/)

  await t.rejects(createClient({ socket: { host: '127.0.0.1', port: redis.port, reconnectStrategy: false }, username: itemsList.username, password: 'wrong' }).connect(), /WRONGPASS/)
})

/** What the ACL file lets `username` do, as Redis read it: its commands, key patterns and channels. */
async function permissionsOf(username: string) {
  const user = await admin.aclGetUser(username)
  if (!user) throw new Error(`no ACL user ${username}`)
  // Redis lists the rules in an order of its own.
  const commands = String(user.commands).split(' ').toSorted()
  const dangerous = new Set(await admin.aclCat('dangerous'))
  return { user, commands, keys: String(user.keys), channels: String(user.channels), dangerousAllowed: commands.filter((rule) => rule.startsWith('+') && dangerous.has(rule.slice(1))) }
}

t.test('the ACL file gives items-list exactly its list (index, header, chunks, legacy list, delete locks, events), its idempotency records and its rate-limit counts, no channel, and the commands it sends', async (t) => {
  const { user, commands, keys, channels, dangerousAllowed } = await permissionsOf(itemsList.username)
  t.match(user.flags, ['on'])
  t.equal(user.passwords.length, 1, 'one password, stored hashed')
  t.equal(keys, '~items ~items:header ~items:legacy ~items:chunk:* ~items:deleting:* ~items:idempotency:* ~items:events ~rate-limit:items-list:*')
  t.equal(channels, '', 'no pub/sub channel')
  const list = ['+type', '+exists', '+rename', '+del', '+zadd', '+zrem', '+zscore', '+zrange', '+hget', '+hmget', '+hset', '+hsetnx', '+hincrby', '+hdel', '+rpush', '+lpop', '+llen', '+lpos', '+lset', '+lrange', '+time']
  t.same(commands, ['-@all', '+ping', '+select', ...list, '+get', '+set', '+evalsha', '+eval', '+incr', '+pexpire', '+pttl', '+wait', '+scan', '+unlink', '+xadd', '+xinfo', '+xrange', '+xread'].toSorted())
  t.same(dangerousAllowed, [], 'no @dangerous command')
})

t.test('the ACL file turns the default user off, with every right, so that Redis can replay any write from its append-only file', async (t) => {
  const { user, commands, keys, channels } = await permissionsOf('default')
  t.match(user.flags, ['off'])
  t.notMatch(user.flags, ['on'])
  t.same(commands, ['+@all'])
  t.equal(keys, '~*')
  t.equal(channels, '&*')
})

t.test('the ACL file gives healthcheck PING and nothing else, on no key and no channel', async (t) => {
  const { user, commands, keys, channels } = await permissionsOf('healthcheck')
  t.match(user.flags, ['on', 'nopass'])
  t.same(commands, ['-@all', '+ping'].toSorted())
  t.equal(keys, '')
  t.equal(channels, '')
})
