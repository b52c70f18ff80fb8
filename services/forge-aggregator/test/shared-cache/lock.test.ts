import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { createClient } from 'redis'
import { createRedisConnection, type RedisConnection, type RedisSubscriber } from '@repo/service-kit'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { createProductionLock, type ProductionClaim, type ProductionLock } from '../../src/shared-cache/lock.ts'

// The lock on its own, on a private Redis: what the app-level tests of lock-across-replicas.test.ts
// cannot reach, such as a replica whose Redis refuses one command, or a subscriber cut off.
const redis = await startPrivateRedis({ durable: false })
const adminUrl = `redis://127.0.0.1:${redis.port}`
// Registered before anything can fail: a Redis left running keeps the file alive until tap's
// time limit. A refused connect is retried by the client, not thrown.
t.teardown(() => redis.dispose())
const admin = createClient({ url: adminUrl })
admin.on('error', () => {})
t.teardown(() => admin.destroy())
await admin.connect()
t.afterEach(() => admin.flushAll())

const NAMESPACE = 'forge:lock-test:'
const CHANNEL = `${NAMESPACE}released`
/** Long enough that a waiter let go within a second was let go by something other than the wait's end. */
const WAIT_MS = 5_000
const PROBE_MS = 50

interface Replica {
  lock: ProductionLock
  /** The commands it sent through its connection, in order. */
  commands: string[]
  /** Its log lines, parsed. */
  logs: Record<string, unknown>[]
  /** The connection its lock listens for announcements on. */
  subscriber: RedisSubscriber
}

/**
 * One replica's lock, connected as `user` (the default user unless given), ready to claim when
 * `listening` (its subscription to the announcements is confirmed); closed at the end of `t`.
 */
async function replica(t: Test, { user, listening = true }: { user?: string; listening?: boolean } = {}): Promise<Replica> {
  const logs: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) })
  const commands: string[] = []
  const url = user === undefined ? adminUrl : `redis://${user}:secret@127.0.0.1:${redis.port}`
  const connection = createRedisConnection({ target: { url }, logger, purpose: 'shared cache', probeIntervalMs: PROBE_MS, onCommand: (command) => commands.push(command) })
  let subscriber: RedisSubscriber | undefined
  // The connection itself, but for `duplicate`, which hands the test the lock's subscriber too.
  const watched = Object.create(connection, { duplicate: { value: () => (subscriber = connection.duplicate()) } }) as RedisConnection
  const lock = createProductionLock({
    connection: watched,
    namespace: NAMESPACE,
    waitMs: WAIT_MS,
    probeIntervalMs: PROBE_MS,
    logger,
  })
  t.teardown(async () => {
    await lock.close()
    await connection.close()
  })
  t.ok(await eventually(async () => connection.isAvailable), 'connected')
  if (listening) t.ok(await eventually(async () => logs.some((line) => line.msg === 'listening for production announcements')), 'listening')
  return { lock, commands, logs, subscriber: subscriber! }
}

/**
 * Whether `replica`, a waiter, sends `count` more probes (PINGs) within about 5 s. It probes every
 * PROBE_MS: by then any probe another lock started as early would have been sent too, so the
 * waiter's probes stand in for a fixed wait when a test shows that something is not sent.
 */
async function probed(replica: Replica, count: number): Promise<boolean> {
  const pings = () => replica.commands.filter((command) => command === 'PING').length
  const target = pings() + count
  return eventually(async () => pings() >= target)
}

/** Whether `claim` is another replica's production that ends within `ms`. */
async function releasedWithin(claim: ProductionClaim, ms: number): Promise<boolean> {
  if (claim.kind !== 'theirs') return false
  return Promise.race([claim.released.then(() => true), sleep(ms, false)])
}

t.test('a replica that cannot listen for announcements claims nothing: it produces alone rather than wait blind', async (t) => {
  // Redis 7 users have no channel unless given one: this one may SET but not SUBSCRIBE.
  await admin.sendCommand(['ACL', 'SETUSER', 'deaf', 'on', '>secret', '~*', 'resetchannels', '+@all'])
  const { lock } = await replica(t, { user: 'deaf', listening: false })
  t.ok(await eventually(async () => (await admin.clientList()).filter((client) => client.user === 'deaf').length === 2), 'its subscriber connected')
  t.same(await lock.claim('repo/octocat/hello'), { kind: 'unknown' })
  t.same(await admin.keys(`${NAMESPACE}lock:*`), [], 'no lock taken')
})

t.test('a claim Redis refuses is unknown, and leaves no waiter probing behind it', async (t) => {
  await admin.sendCommand(['ACL', 'SETUSER', 'readonly', 'on', '>secret', '~*', '&*', '+@all', '-set'])
  const { lock, commands } = await replica(t, { user: 'readonly' })
  // A replica waiting on another's production, started first: its probes mark the intervals.
  const producer = await replica(t)
  const waiter = await replica(t)
  t.equal((await producer.lock.claim('repo/octocat/hello')).kind, 'mine')
  t.equal((await waiter.lock.claim('repo/octocat/hello')).kind, 'theirs')
  t.same(await lock.claim('repo/octocat/hello'), { kind: 'unknown' })
  t.ok(await probed(waiter, 3), 'the waiter probed three times since')
  t.same(commands, ['SET'], 'no PING after the refusal')
})

t.test('a replica that takes the lock stops the probes a wait needs; one that waits probes every interval', async (t) => {
  const producer = await replica(t)
  const waiter = await replica(t)
  t.equal((await producer.lock.claim('repo/octocat/hello')).kind, 'mine')
  t.equal((await waiter.lock.claim('repo/octocat/hello')).kind, 'theirs')
  t.ok(await probed(waiter, 3), `the waiter probed: ${waiter.commands.join(' ')}`)
  t.same(producer.commands, ['SET'], 'the producer sent nothing more')
})

t.test('an error on the announcements connection lets every waiter of the replica go at once, and claims are unknown until it is back', async (t) => {
  const producer = await replica(t)
  const waiter = await replica(t)
  for (const key of ['repo/octocat/hello', 'user/octocat']) t.equal((await producer.lock.claim(key)).kind, 'mine')
  const waits = await Promise.all(['repo/octocat/hello', 'user/octocat'].map((key) => waiter.lock.claim(key)))
  // Claimed the moment the subscriber reports its error, before it has reconnected.
  const duringOutage: Promise<ProductionClaim>[] = []
  waiter.subscriber.on('error', () => duringOutage.push(waiter.lock.claim('repo/octocat/other')))

  await admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub'])
  const released = await Promise.all(waits.map((wait) => releasedWithin(wait, 1_000)))
  t.same(released, [true, true], 'both waiters let go within a second, not after the wait')
  t.ok(duringOutage.length > 0, 'the subscriber reported the error')
  t.same(await duringOutage[0], { kind: 'unknown' })
})

t.test('a release is announced once: called again, or followed by close(), it announces nothing more', async (t) => {
  const listener = admin.duplicate()
  await listener.connect()
  t.teardown(() => listener.close())
  const announced: string[] = []
  await listener.subscribe(CHANNEL, (key) => announced.push(key))

  const { lock } = await replica(t)
  const claim = await lock.claim('repo/octocat/hello')
  t.equal(claim.kind, 'mine')
  if (claim.kind === 'mine') {
    claim.release()
    claim.release()
  }
  // Its releases have reached Redis once close() resolves; the marker comes after them.
  await lock.close()
  await admin.publish(CHANNEL, 'marker')
  t.ok(await eventually(async () => announced.includes('marker')))
  t.same(announced, ['repo/octocat/hello', 'marker'])
})

t.test('close() resolves only once Redis has its releases: the connection may close right after', async (t) => {
  const { lock } = await replica(t)
  t.equal((await lock.claim('repo/octocat/hello')).kind, 'mine')
  // Writes, the release's script among them, wait out the pause; reads do not.
  await admin.sendCommand(['CLIENT', 'PAUSE', '300', 'WRITE'])
  const started = Date.now()
  await lock.close()
  t.ok(Date.now() - started >= 250, `resolved after ${Date.now() - started} ms, once the pause let the release through`)
  t.same(await admin.keys(`${NAMESPACE}lock:*`), [], 'the lock is gone when close() resolves')
})

t.test('close() releases the locks still held, says how many, and lets every waiter of its own replica go', async (t) => {
  const producer = await replica(t)
  const waiter = await replica(t)
  const stopping = await replica(t)
  t.equal((await stopping.lock.claim('repo/octocat/hello')).kind, 'mine')
  t.equal((await producer.lock.claim('user/octocat')).kind, 'mine')
  const elsewhere = await waiter.lock.claim('repo/octocat/hello')
  const ownWait = await stopping.lock.claim('user/octocat')

  await stopping.lock.close()
  t.ok(await releasedWithin(ownWait, 1_000), 'its own waiter let go, though the producer still holds its lock')
  t.ok(await releasedWithin(elsewhere, 1_000), 'the waiter on another replica let go')
  t.same(await admin.keys(`${NAMESPACE}lock:repo/*`), [], 'its lock deleted')
  t.same(stopping.logs.filter((line) => line.msg === 'production locks released at shutdown').map((line) => line.locks), [1])

  await waiter.lock.close()
  t.notOk(waiter.logs.some((line) => line.msg === 'production locks released at shutdown'), 'a replica holding no lock says nothing of locks')
})
