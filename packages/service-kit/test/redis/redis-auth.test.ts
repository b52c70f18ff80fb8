import t, { type Test } from 'tap'
import { copyFile } from 'node:fs/promises'
import { createClient } from 'redis'
import { ConfigError } from '@repo/config'
import { createTestCertificates, eventually, startPrivateRedis, captureLogs } from '@repo/test-support'
import { createLogger, createRedisConnection, type RedisTarget } from '../../src/index.ts'
import { clientOptions } from '../../src/redis/location.ts'

/** The problems of the `ConfigError` that `make` throws. */
function configProblems(make: () => unknown): readonly string[] {
  try {
    make()
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  throw new Error('no ConfigError')
}

/** A connection to `target` with its log lines, closed at the end of the test. */
function open(t: Test, target: RedisTarget) {
  const logs = captureLogs()
  const connection = createRedisConnection({
    target,
    logger: createLogger('info', logs.destination),
    purpose: 'auth test',
    deadlineMs: 500,
  })
  t.teardown(() => connection.close())
  return { connection, logs, lines: logs.lines }
}

t.test('TLS (rediss://): with REDIS_CA_FILE the private CA is trusted and commands are answered; without it the certificate is refused', async (t) => {
  const certificates = await createTestCertificates()
  t.teardown(() => certificates.dispose())
  const redis = await startPrivateRedis({ durable: false, tls: certificates })
  t.teardown(() => redis.dispose())
  const url = `rediss://localhost:${redis.port}`

  const trusted = open(t, { url, caFile: certificates.caFile })
  t.ok(await eventually(async () => trusted.connection.isAvailable), 'connected with the CA')
  t.equal(await trusted.connection.run('ping', (client) => client.ping()), 'PONG')

  const untrusted = open(t, { url })
  const reported = await untrusted.logs.waitFor((line) => line.msg === 'Redis unavailable; reconnecting in the background')
  t.notOk(untrusted.connection.isAvailable, 'never available')
  t.match(reported, { err: { code: /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/ } }, 'refused for its certificate')

  // The same server in plain text refuses a plain connection: the data never crosses unencrypted.
  const plain = open(t, { url: `redis://localhost:${redis.port}` })
  t.notOk(await eventually(async () => plain.connection.isAvailable, 10), 'no plain-text connection')
})

t.test('REDIS_CA_FILE that cannot be read is a start-up error naming it, without its contents', async (t) => {
  t.same(configProblems(() => clientOptions({ url: 'rediss://localhost:6380', caFile: '/nonexistent/ca.pem' })), ['REDIS_CA_FILE cannot be read (ENOENT)'])
})

t.test('REDIS_CA_FILE without TLS is a start-up error naming it: it would be silently ignored', async (t) => {
  const file = t.testdir({ 'ca.pem': 'not read' })
  for (const target of [{ url: 'redis://localhost:6379' }, { host: 'localhost', port: 6379 }]) {
    t.same(configProblems(() => clientOptions({ ...target, caFile: `${file}/ca.pem` })), ['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
  }
})

t.test('REDIS_CA_FILE with REDIS_SENTINELS is a start-up error naming it: TLS needs the URL form', async (t) => {
  const file = t.testdir({ 'ca.pem': 'not read' })
  const sentinelTarget = { sentinels: [{ host: '127.0.0.1', port: 26379 }], name: 'mymaster', caFile: `${file}/ca.pem` }
  t.same(configProblems(() => open(t, sentinelTarget)), ['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
})

t.test('REDIS_USERNAME and REDIS_PASSWORD log in as that ACL user, on a URL and on host and port; the log names the user, never the password', async (t) => {
  const redis = await startPrivateRedis({ durable: false, args: ['--user', 'default', 'off', '--user', 'app', 'on', '>s3cret-pw', '~app:*', '+@all'] })
  t.teardown(() => redis.dispose())
  const inspector = createClient({ socket: { host: '127.0.0.1', port: redis.port }, username: 'app', password: 's3cret-pw' })
  await inspector.connect()
  t.teardown(() => inspector.destroy())

  for (const target of [
    { url: `redis://127.0.0.1:${redis.port}`, username: 'app', password: 's3cret-pw' },
    { host: '127.0.0.1', port: redis.port, username: 'app', password: 's3cret-pw' },
  ]) {
    const { connection, lines } = open(t, target)
    t.ok(await eventually(async () => connection.isAvailable), 'logged in')
    await connection.run('set', (client) => client.set('app:where', 'here'))
    t.equal(await inspector.aclWhoAmI(), 'app')
    t.equal(await inspector.get('app:where'), 'here')
    t.match(lines.find((line) => line.msg === 'connecting to Redis'), { username: 'app' })
    t.notMatch(JSON.stringify(lines), 's3cret-pw')
  }
})

t.test('a username or password written in the URL wins over REDIS_USERNAME and REDIS_PASSWORD', async (t) => {
  const redis = await startPrivateRedis({ durable: false, args: ['--user', 'default', 'off', '--user', 'app', 'on', '>right', '~*', '+@all'] })
  t.teardown(() => redis.dispose())
  const { connection } = open(t, { url: `redis://app:right@127.0.0.1:${redis.port}`, username: 'other', password: 'wrong' })
  t.ok(await eventually(async () => connection.isAvailable), 'logged in with the URL’s credentials')
})

t.test('a CA file is read once, at start: a reconnection and a second connection trust the CA read then, whatever the file holds later', async (t) => {
  const [signer, stranger] = await Promise.all([createTestCertificates(), createTestCertificates()])
  t.teardown(() => Promise.all([signer.dispose(), stranger.dispose()]))
  const redis = await startPrivateRedis({ durable: false, tls: signer })
  t.teardown(() => redis.dispose())
  const caFile = `${t.testdir()}/ca.pem`
  await copyFile(signer.caFile, caFile)
  const { connection, lines } = open(t, { url: `rediss://localhost:${redis.port}`, caFile })
  const readyLines = () => lines.filter((line) => line.msg === 'Redis connection ready').length
  t.ok(await eventually(async () => connection.isAvailable), 'connected, trusting the CA in the file')

  // The file now holds a CA that never signed this server: a connection that read it would be refused.
  await copyFile(stranger.caFile, caFile)
  await redis.stop()
  await redis.start()
  t.ok(await eventually(async () => readyLines() === 2, 200), 'reconnected after the restart')
  t.equal(await connection.run('ping', (client) => client.ping()), 'PONG')
  const subscriber = connection.duplicate()
  // Refused, it would retry for ever: wait for it within a bound instead.
  subscriber.connect().catch(() => {})
  t.ok(await eventually(async () => subscriber.isReady), 'a second connection made now trusts the same CA')
})
