import t, { type Test } from 'tap'
import { createClient, defineScript, type CommandParser } from 'redis'
import { createPrivateSentinel, eventually, startPrivateRedis, startPrivateSentinelGroup, captureLogs } from '@repo/test-support'
import { createLogger, createRedisConnection, type CommandOutcome, type RedisSentinelClient } from '../../src/index.ts'

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

/** A connection through the one sentinel of a group with a primary and no replica, ready, with each command's outcome. */
async function connectThroughSentinel(t: Test, deadlineMs?: number) {
  const group = await startPrivateSentinelGroup({ replicas: 0, sentinels: 1 })
  t.teardown(() => group.dispose())
  const admin = createClient({ socket: { host: '127.0.0.1', port: group.primary.port } })
  await admin.connect()
  t.teardown(() => admin.destroy())
  const logs = captureLogs()
  const outcomes: CommandOutcome[] = []
  const connection = createRedisConnection({
    target: { sentinels: [{ host: '127.0.0.1', port: group.sentinels[0]!.port }], name: group.name },
    logger: createLogger('info', logs.destination),
    purpose: 'test store',
    ...(deadlineMs === undefined ? {} : { deadlineMs }),
    onCommand: (_command, outcome) => outcomes.push(outcome),
  })
  t.teardown(() => connection.close())
  if (!(await eventually(async () => connection.isAvailable))) throw new Error('never connected')
  // Redis's own count of the reads it made from its clients' sockets: a burst written whole is
  // read in a few, a burst sent one command per round trip in one per command.
  const readsByPrimary = async () => Number(/^total_reads_processed:(\d+)/m.exec(await admin.info('stats'))?.[1])
  // Connections to the primary but the test's own and the sentinels'.
  const connectionsToPrimary = async () => {
    const own = await admin.clientId()
    return (await admin.clientList()).filter((client) => client.id !== own && !client.name.startsWith('sentinel-')).length
  }
  return { connection, outcomes, readsByPrimary, connectionsToPrimary }
}

t.test('a cold burst of 2,000 commands through sentinels is written as one, as a client’s is: Redis reads it in a few reads, within the deadline', async (t) => {
  const { connection, outcomes, readsByPrimary } = await connectThroughSentinel(t)
  const commands = 2_000
  const readsBefore = await readsByPrimary()
  // Cold: nothing is in flight when the burst starts (the INFO above went through another client).
  const answers = await Promise.all(Array.from({ length: commands }, (_, index) => connection.run('set', (client) => client.set(`cold:${index}`, 'v'))))
  // The INFO that asks counts as one read of its own.
  const reads = (await readsByPrimary()) - readsBefore - 1
  t.same(new Set(answers), new Set(['OK']))
  t.ok(reads < commands / 10, `read in ${reads} reads, not one per command`)
  // The deadline as the connection keeps it, on Redis's time: a wall clock here would count this
  // process's own work, hundreds of ms on a busy machine, and say nothing about the burst.
  t.same(new Set(outcomes), new Set(['ok']), 'no command missed its deadline')
  t.ok(connection.isAvailable, 'still available')
})

t.test('a burst larger than a socket buffer is written at once to the primary found through sentinels: none waits unwritten behind this process’s work', async (t) => {
  const deadlineMs = 200
  const { connection, outcomes } = await connectThroughSentinel(t, deadlineMs)
  // 400 KB in one turn: more than the 16 KB a socket takes by default before node-redis waits for
  // it to drain, so only the 1 MiB buffer given to the data-node connections gets it all out.
  const value = 'x'.repeat(1_024)
  const answers = Array.from({ length: 400 }, (_, index) => connection.run('set', (client) => client.set(`burst:${index}`, value)))
  await new Promise((resolve) => setImmediate(resolve))
  busyFor(deadlineMs * 3)
  t.same(new Set(await Promise.all(answers)), new Set(['OK']))
  t.ok(connection.isAvailable, 'still available')
  t.same(new Set(outcomes), new Set(['ok']))
})

t.test('an exclusive lease of a connection to the primary (use) is not kept waiting behind the one ordinary commands keep', async (t) => {
  const { connection } = await connectThroughSentinel(t)
  const sentinel = connection.client as RedisSentinelClient
  const leased = sentinel.use(async (client) => client.ping())
  const answer = await Promise.race([leased, new Promise((resolve) => setTimeout(resolve, 2_000, 'still waiting for a lease'))])
  t.equal(answer, 'PONG')
  t.equal(await connection.run('ping', (client) => client.ping()), 'PONG', 'ordinary commands meanwhile')
})

t.test('through sentinels, commands keep one connection to the primary and exclusive leases another; a subscriber adds its subscription and one more', async (t) => {
  const { connection, connectionsToPrimary } = await connectThroughSentinel(t)
  t.equal(await connectionsToPrimary(), 2)
  const subscriber = connection.duplicate()
  await subscriber.connect()
  await subscriber.subscribe('news', () => {})
  // The subscriber sends no command of its own: a pool of two would leave one idle.
  t.equal(await connectionsToPrimary(), 4)
})

/** Keeps this process's event loop to itself for `ms`, as a burst of requests does. */
function busyFor(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // Nothing: the point is that nothing else runs.
  }
}
