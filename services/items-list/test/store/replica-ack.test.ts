import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventually, startPrivateRedis, type PrivateRedis } from '@repo/test-support'
import { buildService, connectInspector, type Inspector, storedList } from '../helpers/service.ts'

const UNAVAILABLE = { detail: 'Item store unavailable' }
/** The connection's default deadline: a 503 for want of replicas must come before it. */
const DEADLINE_MS = 500
/** Appends sent at once: enough that WAITs sent one by one would outlast the deadline many times over. */
const BURST = 20

type App = Awaited<ReturnType<typeof buildService>>['app']

function post(app: App, name: string, key?: string) {
  return app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })
}

/**
 * A private Redis that replicates to a new replica at once: by default a primary waits 5 s for
 * more replicas before a diskless full sync, which made this file outlast tap's timeout.
 */
function startPrimary(): Promise<PrivateRedis> {
  return startPrivateRedis({ args: ['--repl-diskless-sync-delay', '0'] })
}

/** A replica of `primary`, started, and an inspector on it, once it holds everything the primary has. */
async function startReplica(t: Test, primary: PrivateRedis): Promise<{ replica: PrivateRedis; onReplica: Inspector }> {
  const replica = await startPrivateRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })
  const onReplica = await connectInspector(replica.port)
  t.teardown(async () => {
    onReplica.destroy()
    await replica.dispose()
  })
  const linked = await eventually(async () => (await onReplica.info('replication')).includes('master_link_status:up'), 200)
  if (!linked) throw new Error('the replica never synchronised with its primary')
  // A primary streams writes to a replica fresh from a diskless sync only after its first
  // acknowledgement (Redis 7), up to a second later: until then a WAIT counts it out.
  // Every replica it has, this one and any started before: a WAIT for fewer would return as soon
  // as an older one confirms.
  const onPrimary = await connectInspector(primary.port)
  const replicas = Number(/^connected_slaves:(\d+)/m.exec(await onPrimary.info('replication'))?.[1])
  await onPrimary.set('replica-streaming', '1')
  const streaming = await onPrimary.wait(replicas, 10_000)
  onPrimary.destroy()
  if (streaming < replicas) throw new Error('the primary never streamed to its replica')
  return { replica, onReplica }
}

t.test('ITEMS_MIN_REPLICAS_ACK=1 on a primary without replicas: 503 within the deadline, and the retry once a replica holds it stores nothing twice', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { app, storedItems } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })

  const started = performance.now()
  const first = await post(app, 'pear', 'key-1')
  t.equal(first.statusCode, 503)
  t.same(first.json(), UNAVAILABLE)
  t.ok(performance.now() - started < DEADLINE_MS, 'answered before the command deadline')

  const replayed = await post(app, 'pear', 'key-1')
  t.equal(replayed.statusCode, 503, 'a replay waits for replicas too')
  t.equal((await post(app, 'plum')).statusCode, 503, 'an append without a key waits too')

  // While an append waits for replicas (up to half the deadline), reads and probes are answered
  // at once, not after it.
  const waiting = post(app, 'quince', 'key-5')
  const readStarted = performance.now()
  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200, 'a primary without replicas is still ready')
  t.ok(performance.now() - readStarted < DEADLINE_MS / 2 - 50, 'reads do not wait behind the appends')
  t.equal((await waiting).statusCode, 503)

  const { onReplica } = await startReplica(t, primary)
  const retried = await post(app, 'pear', 'key-1')
  t.equal(retried.statusCode, 201)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.same(await storedItems(), ['pear', 'plum', 'quince'], 'the 503s were stored once each, the retry added nothing')
  t.same(await storedList(onReplica, 'items'), ['pear', 'plum', 'quince'])
})

t.test('ITEMS_MIN_REPLICAS_ACK=1 with one replica: 201, and the replica holds the name when the 201 is sent', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { onReplica } = await startReplica(t, primary)
  const { app } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })

  const keyed = await post(app, 'fig', 'key-2')
  t.equal(keyed.statusCode, 201)
  t.same(await storedList(onReplica, 'items'), ['fig'])
  t.equal((await post(app, 'kiwi')).statusCode, 201)
  t.same(await storedList(onReplica, 'items'), ['fig', 'kiwi'])
})

t.test('ITEMS_MIN_REPLICAS_ACK=2 with one of two replicas frozen: 503, though one replica confirmed it; 201 once both confirm', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const [first, second] = [await startReplica(t, primary), await startReplica(t, primary)]
  const { app, storedItems } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '2' } })
  t.equal((await post(app, 'apricot', 'key-6')).statusCode, 201, 'both replicas confirm')

  second.replica.pause()
  t.teardown(() => second.replica.resume())
  const refused = await post(app, 'banana', 'key-7')
  t.equal(refused.statusCode, 503)
  t.same(refused.json(), UNAVAILABLE)
  t.same(await storedList(first.onReplica, 'items'), ['apricot', 'banana'], 'one replica did hold it: one is not enough')
  t.equal((await post(app, 'cherry')).statusCode, 503, 'an append without a key too')

  second.replica.resume()
  const retried = await post(app, 'banana', 'key-7')
  t.equal(retried.statusCode, 201)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.same(await storedItems(), ['apricot', 'banana', 'cherry'])
})

t.test('a replayed append waits until the replicas hold its record, even when another instance made the append', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { replica, onReplica } = await startReplica(t, primary)
  const env = { ITEMS_MIN_REPLICAS_ACK: '1' }
  const { app: first } = await buildService(t, { redis: primary, env })
  const { app: second, storedItems } = await buildService(t, { redis: primary, env })

  // The replica confirms everything written so far, then stops confirming anything.
  const onPrimary = await connectInspector(primary.port)
  t.teardown(() => onPrimary.destroy())
  await onPrimary.set('before-the-pause', '1')
  t.equal(await onPrimary.wait(1, 5_000), 1)
  replica.pause()
  t.teardown(() => replica.resume())
  t.equal((await post(first, 'lime', 'key-3')).statusCode, 503, 'the replica cannot confirm it')
  // The second instance has written nothing on its connection: a WAIT there would be satisfied
  // at once by the paused replica, whose last confirmation predates the append.
  t.equal((await post(second, 'lime', 'key-3')).statusCode, 503, 'the replay elsewhere waits for the record')

  replica.resume()
  const retried = await post(second, 'lime', 'key-3')
  t.equal(retried.statusCode, 201)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.same(await storedItems(), ['lime'])
  t.same(await storedList(onReplica, 'items'), ['lime'])
})

t.test('ITEMS_MIN_REPLICAS_ACK=0 (the default) never waits: 201 from a lone primary, on the one connection', async (t) => {
  const { app, inspector, logs } = await buildService(t)
  t.equal((await post(app, 'date', 'key-4')).statusCode, 201)
  t.equal((await post(app, 'date', 'key-4')).statusCode, 201)
  t.equal(await connectionsBut(inspector), 1, 'no connection of its own for appends')
  t.notOk(logs.lines.some((line) => line.purpose === 'item store appends'))
})

t.test('with ITEMS_MIN_REPLICAS_ACK, appends go on a second connection, named in its log lines', async (t) => {
  const { app, inspector, logs } = await buildService(t, { env: { ITEMS_MIN_REPLICAS_ACK: '1' } })
  t.equal((await post(app, 'date')).statusCode, 503, 'no replica here to confirm it')
  t.equal(await connectionsBut(inspector), 2)
  t.ok(logs.lines.some((line) => line.msg === 'connecting to Redis' && line.purpose === 'item store appends'))
})

t.test('a replica briefly behind does not fail the append: the WAIT lasts up to half the deadline', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { replica, onReplica } = await startReplica(t, primary)
  const { app } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })
  replica.pause()
  t.teardown(() => replica.resume())
  const answer = post(app, 'elderberry')
  setTimeout(() => replica.resume(), 100)
  t.equal((await answer).statusCode, 201, 'confirmed once the replica caught up, 100 ms later')
  t.same(await storedList(onReplica, 'items'), ['elderberry'])
})

t.test('a burst of appends while the replica is behind: each answers 503 within its wait, and Redis is never set aside', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { replica } = await startReplica(t, primary)
  const { app, logs, storedItems } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })
  replica.pause()
  t.teardown(() => replica.resume())

  // One WAIT per append, queued on the connection, would keep the last of them waiting 20 times
  // half the deadline.
  const names = Array.from({ length: BURST }, (_, n) => `burst-${n}`)
  const answers = await Promise.all(names.map((name) => post(app, name, `key-${name}`)))
  t.same(answers.map((answer) => answer.statusCode), names.map(() => 503), 'every append is refused for want of a replica')
  t.match(await metrics(app), /^items_store_commands_total\{command="append_once",outcome="timeout"\} 0$/m, 'none of them missed the deadline')
  t.notOk(logs.lines.some((line) => line.msg === 'Redis unavailable; reconnecting in the background'), 'Redis was not set aside')

  replica.resume()
  const retried = await Promise.all(names.map((name) => post(app, name, `key-${name}`)))
  t.same(retried.map((answer) => answer.statusCode), names.map(() => 201), 'each retry is answered once the replica holds it')
  t.same((await storedItems()).sort(), [...names].sort(), 'each name stored once')
})

t.test('a group’s WAIT is timed from its oldest append: one that waited for the group before it waits only what is left of its half of the deadline', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const { replica } = await startReplica(t, primary)
  const { app } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })
  replica.pause()
  t.teardown(() => replica.resume())
  /** The WAIT an append was refused after, in ms, from the reason its store gives; infinite past the deadline. */
  const waitOf = (name: string) =>
    app.itemStore.append(name).then(
      () => Number.NaN,
      (error: Error) => (error.cause instanceof Error ? Number(/within (\d+) ms/.exec(error.cause.message)?.[1]) : Number.POSITIVE_INFINITY),
    )

  const alone = waitOf('first, alone')
  await sleep(20)
  // Both wait for the first group's WAIT (250 ms), then go as one group.
  const oldest = waitOf('oldest of the next group')
  await sleep(210)
  const newest = waitOf('newest of the next group')
  const [aloneWait, oldestWait, newestWait] = await Promise.all([alone, oldest, newest])
  t.ok(aloneWait > DEADLINE_MS / 2 - 50, `the first waited ${aloneWait} ms`)
  t.ok(oldestWait < 120, `the oldest append, asked 20 ms after the first, waited ${oldestWait} ms more (the newest: ${newestWait} ms)`)
})

t.test('appends sent together share their WAITs, one a group, and one that Redis refuses fails its group whole: none of it stored', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  await startReplica(t, primary)
  const { app, inspector, storedItems } = await buildService(t, { redis: primary, env: { ITEMS_MIN_REPLICAS_ACK: '1' } })
  // Its idempotency record is a list: reading it, the group's script fails with WRONGTYPE.
  await inspector.rPush('items:idempotency:key-refused', 'not a record')
  const waitsBefore = await waitsSent(inspector)

  const names = Array.from({ length: BURST }, (_, n) => `together-${n}`)
  const refused = names[BURST / 2]!
  const answers = await Promise.all(names.map((name) => post(app, name, name === refused ? 'key-refused' : `key-${name}`)))
  const statuses = new Map(names.map((name, n) => [name, answers[n]!.statusCode]))
  t.equal(statuses.get(refused), 503, 'the refused append answers 503')
  t.same(new Set(statuses.values()), new Set([201, 503]), 'the appends of other groups 201')
  t.same((await storedItems()).sort(), names.filter((name) => statuses.get(name) === 201).sort(), 'every 201 stored, nothing of the refused group')
  const waits = (await waitsSent(inspector)) - waitsBefore
  t.ok(waits < BURST / 2, `${BURST} appends at once were confirmed by ${waits} WAITs`)
})

t.test('a WAIT that Redis refuses (an ACL user without it) fails the appends it was to confirm: 503, stored once, Redis not set aside', async (t) => {
  const primary = await startPrimary()
  t.teardown(() => primary.dispose())
  const admin = await connectInspector(primary.port)
  t.teardown(() => admin.destroy())
  await admin.aclSetUser('without-wait', ['on', '>s3cret', '~*', '&*', '+@all', '-wait'])
  const { app, logs, storedItems } = await buildService(t, {
    redis: primary,
    env: { ITEMS_MIN_REPLICAS_ACK: '1', REDIS_USERNAME: 'without-wait', REDIS_PASSWORD: 's3cret' },
  })

  const answer = await post(app, 'gooseberry', 'key-8')
  t.equal(answer.statusCode, 503)
  t.same(answer.json(), UNAVAILABLE)
  t.match(logs.lines.find((line) => line.msg === 'request failed'), { err: { message: /NOPERM.*wait/i } }, 'the refusal is logged')
  t.same(await storedItems(), ['gooseberry'], 'written, but never confirmed')
  t.equal((await post(app, 'gooseberry', 'key-8')).statusCode, 503, 'its retry is refused the same way')
  t.same(await storedItems(), ['gooseberry'], 'and stores nothing twice')
  t.notOk(logs.lines.some((line) => line.msg === 'Redis unavailable; reconnecting in the background'))
})

/** How many WAITs Redis has run (`INFO commandstats`). */
async function waitsSent(inspector: Inspector): Promise<number> {
  return Number(/^cmdstat_wait:calls=(\d+)/m.exec(await inspector.info('commandstats'))?.[1] ?? 0)
}

async function metrics(app: App): Promise<string> {
  return (await app.inject({ method: 'GET', url: '/metrics' })).body
}

/** Clients connected to the inspector's Redis, the inspector itself left out. */
async function connectionsBut(inspector: Inspector): Promise<number> {
  const own = await inspector.clientId()
  return (await inspector.clientList()).filter((client) => client.id !== own && !client.flags.includes('S')).length
}
