import t from 'tap'
import { createClient, defineScript, type CommandParser } from 'redis'
import { createPrivateSentinel, eventually, startPrivateRedis, startPrivateSentinelGroup, captureLogs } from '@repo/test-support'
import { createLogger, createRedisConnection } from '../src/index.ts'

// A Sentinel client gives up connecting after 16 rediscoveries a second apart.
t.setTimeout(90_000)

const REPEAT = defineScript({
  SCRIPT: 'return ARGV[1]',
  NUMBER_OF_KEYS: 0,
  parseCommand(parser: CommandParser, value: string) {
    parser.push(value)
  },
  transformReply: (reply: unknown) => String(reply),
})

t.test('through sentinels: commands, scripts and a subscriber reach the primary they name, as the user given, in the database given', async (t) => {
  const group = await startPrivateSentinelGroup({ replicas: 0, sentinels: 1, name: 'items-primary' })
  t.teardown(() => group.dispose())
  const admin = createClient({ socket: { host: '127.0.0.1', port: group.primary.port } })
  await admin.connect()
  t.teardown(() => admin.destroy())
  await admin.sendCommand(['ACL', 'SETUSER', 'items', 'on', '>s3cret', '~*', '&*', '+@all'])

  const logs = captureLogs()
  const { lines } = logs
  const connection = createRedisConnection({
    target: { sentinels: [{ host: '127.0.0.1', port: group.sentinels[0]!.port }], name: group.name, database: 2, username: 'items', password: 's3cret' },
    scripts: { repeat: REPEAT },
    logger: createLogger('info', logs.destination),
    purpose: 'test store',
  })
  t.teardown(() => connection.close())
  t.ok(await eventually(async () => connection.isAvailable), 'available')

  t.equal(await connection.run('whoami', (client) => client.aclWhoAmI()), 'items')
  t.equal(await connection.run('repeat', (client) => client.repeat('hi')), 'hi', 'scripts are defined')
  await connection.run('set', (client) => client.set('k', 'v'))
  await admin.select(2)
  t.equal(await admin.get('k'), 'v', 'written in database 2 of the primary')

  const subscriber = connection.duplicate()
  await subscriber.connect()
  const heard = new Promise<string>((resolve) => void subscriber.subscribe('news', (message) => resolve(message)))
  await eventually(async () => (await admin.pubSubNumSub('news'))['news'] === 1)
  await admin.publish('news', 'hello')
  t.equal(await heard, 'hello')

  const connecting = lines.find((line) => line.msg === 'connecting to Redis')
  t.match(connecting, { purpose: 'test store', sentinels: [`127.0.0.1:${group.sentinels[0]!.port}`], name: group.name, database: 2 })
  t.notMatch(JSON.stringify(lines), 's3cret')
})

t.test('no sentinel answering at start: the outage is logged once, and the primary is found once a sentinel answers, however late', async (t) => {
  const primary = await startPrivateRedis({ durable: false })
  t.teardown(() => primary.dispose())
  const sentinel = await createPrivateSentinel({ primaryPort: primary.port, quorum: 1, name: 'cache-primary' })
  t.teardown(() => sentinel.dispose())
  const logs = captureLogs()
  const { lines } = logs
  const connection = createRedisConnection({
    target: { sentinels: [{ host: '127.0.0.1', port: sentinel.port }], name: 'cache-primary' },
    logger: createLogger('info', logs.destination),
    purpose: 'test store',
  })
  t.teardown(() => connection.close())

  // The client gives up (and closes) once; the connection asks it to connect again.
  await new Promise((resolve) => connection.client.on('end', resolve))
  await sentinel.start()
  t.ok(await eventually(async () => connection.isAvailable, 200), 'available once the sentinel answers')
  t.equal(await connection.run('ping', (client) => client.ping()), 'PONG')
  t.equal(lines.filter((line) => line.msg === 'Redis unavailable; reconnecting in the background').length, 1, 'the outage is logged once')
})
