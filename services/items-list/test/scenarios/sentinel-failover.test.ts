import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventually, redisOutages, repeatsAnOutage, startPrivateSentinelGroup } from '@repo/test-support'
import { buildService, connectInspector, type Inspector } from '../helpers/service.ts'

// Sentinels need a second of silence to call the primary down, then an election and a promotion.
t.setTimeout(120_000)

const CLIENTS = 6
const RETRY_PAUSE_MS = 50
/** The longest the replicas stay cut off before the primary dies: under the sentinels' 1 s. */
const CUT_MS = 700

t.test('a primary killed under acknowledged POST load: every name answered 201 is kept exactly once, and appends succeed again within 10 s', async (t) => {
  const group = await startPrivateSentinelGroup()
  t.teardown(() => group.dispose())
  const { app, logs } = await buildService(t, {
    redis: group.primary,
    env: { REDIS_SENTINELS: group.sentinelList, REDIS_SENTINEL_NAME: group.name, ITEMS_MIN_REPLICAS_ACK: '1' },
  })

  const acknowledged: string[] = []
  const failures = new Map<string, number>()
  let killedAt = Number.POSITIVE_INFINITY
  let recoveredAt: number | undefined
  let stopping = false

  /** Appends names one after another, each retried with its Idempotency-Key until it is answered 201. */
  async function client(id: number): Promise<void> {
    for (let n = 0; !stopping; n++) {
      const name = `client-${id}-${n}`
      for (;;) {
        const sentAt = performance.now()
        const res = await app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: { 'idempotency-key': name } })
        if (res.statusCode === 201) {
          acknowledged.push(name)
          if (sentAt > killedAt) recoveredAt ??= performance.now()
          break
        }
        failures.set(String(res.statusCode), (failures.get(String(res.statusCode)) ?? 0) + 1)
        await sleep(RETRY_PAUSE_MS)
      }
    }
  }

  const clients = Array.from({ length: CLIENTS }, (_, id) => client(id))
  t.ok(await eventually(async () => acknowledged.length >= 30, 500, 20), 'appends are answered 201 before the failover')
  const oldPrimary = await group.primaryPort()
  // Just before the crash the replicas lose their link (frozen, so that they cannot reconnect,
  // for less than the sentinels' 1 s): the appends of that moment reach the primary alone, and
  // die with it unless they were answered 503.
  const onPrimary = await connectInspector(group.primary.port)
  t.teardown(() => onPrimary.destroy())
  for (const replica of group.replicas) replica.pause()
  await onPrimary.sendCommand(['CLIENT', 'KILL', 'TYPE', 'replica'])
  const pausedAt = acknowledged.length
  const cutAt = performance.now()
  // The primary dies once an append has reached it alone (the appends are the only scripts sent),
  // and well before the sentinels' 1 s would call the frozen replicas down too.
  const scriptsAtCut = await scriptsRun(onPrimary)
  while ((await scriptsRun(onPrimary)) === scriptsAtCut && performance.now() - cutAt < CUT_MS) await sleep(10)
  t.ok((await scriptsRun(onPrimary)) > scriptsAtCut, `an append reached the primary alone, ${Math.round(performance.now() - cutAt)} ms after the cut`)
  killedAt = performance.now()
  await group.primary.stop()
  for (const replica of group.replicas) replica.resume()
  t.comment(`${acknowledged.length - pausedAt} appends answered 201 while the replicas were cut off`)
  while (recoveredAt === undefined && performance.now() - killedAt < 20_000) await sleep(50)
  const afterKill = acknowledged.length
  while (acknowledged.length < afterKill + 30 && performance.now() - killedAt < 30_000) await sleep(20)
  stopping = true
  await Promise.all(clients)

  t.ok(recoveredAt !== undefined && recoveredAt - killedAt < 10_000, `appends succeeded again ${Math.round((recoveredAt ?? Number.NaN) - killedAt)} ms after the kill`)
  t.not(await group.primaryPort(), oldPrimary, 'a replica was promoted')
  t.same([...failures.keys()].filter((status) => status !== '503'), [], 'every failed append was a 503')

  // Reads go over the store's other connection, which finds the new primary on its own schedule.
  const readList = () => app.inject({ method: 'GET', url: '/items/' })
  let read = await readList()
  while (read.statusCode !== 200 && performance.now() - killedAt < 20_000) {
    await sleep(50)
    read = await readList()
  }
  t.equal(read.statusCode, 200, `the list is read again ${Math.round(performance.now() - killedAt)} ms after the kill`)
  const list = read.json<{ items: string[] }>().items
  const counts = new Map<string, number>()
  for (const name of list) counts.set(name, (counts.get(name) ?? 0) + 1)
  t.same(acknowledged.filter((name) => counts.get(name) !== 1), [], 'every name answered 201 is in the list exactly once')
  t.same([...counts].filter(([, count]) => count > 1), [], 'no name is stored twice')
  t.comment(`${acknowledged.length} appends answered 201, ${failures.get('503') ?? 0} answered 503 and retried`)

  // The connection's own resilience holds across the failover: each outage one warning per
  // connection, its end logged, the gauge back at 1.
  const outages = redisOutages(logs.lines)
  for (const purpose of ['item store', 'item store appends']) {
    const events = outages.get(purpose) ?? []
    t.ok(events.includes('down'), `${purpose}: the outage is logged`)
    t.notOk(repeatsAnOutage(events), `${purpose}: each outage is logged once: ${events.join(', ')}`)
  }
  t.equal(outages.get('item store')?.at(-1), 'up', 'its end is logged')
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /^items_store_up 1$/m)
})

t.test('a short list held before a failover that lost an append: the GET after answers what the new primary holds, though its header reads the same', async (t) => {
  const group = await startPrivateSentinelGroup()
  t.teardown(() => group.dispose())
  const { app } = await buildService(t, { redis: group.primary, env: { REDIS_SENTINELS: group.sentinelList, REDIS_SENTINEL_NAME: group.name } })
  const append = async (name: string) => (await app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: { 'idempotency-key': name } })).statusCode
  const list = async () => {
    const read = await app.inject({ method: 'GET', url: '/items/' })
    return read.statusCode === 200 ? read.json<{ items: string[] }>().items : read.statusCode
  }
  for (const name of ['a', 'b']) t.equal(await append(name), 201)
  const onPrimary = await connectInspector(group.primary.port)
  t.teardown(() => onPrimary.destroy())
  t.ok(await eventually(async () => (await onPrimary.sendCommand<number>(['WAIT', '2', '100'])) === 2), 'both replicas hold a and b')

  // The replicas cut off, an append reaches the primary alone: the list held is a, b, lost.
  for (const replica of group.replicas) replica.pause()
  await onPrimary.sendCommand(['CLIENT', 'KILL', 'TYPE', 'replica'])
  t.equal(await append('lost'), 201)
  for (let read = 0; read < 3; read++) t.same(await list(), ['a', 'b', 'lost'])
  await group.primary.stop()
  for (const replica of group.replicas) replica.resume()

  // The promoted replica has a and b; one more append (retried with its key: stored once) gives
  // its header the fields of the list held.
  const killedAt = performance.now()
  while ((await append('kept')) !== 201 && performance.now() - killedAt < 20_000) await sleep(50)
  const onNewPrimary = await connectInspector(await group.primaryPort())
  t.teardown(() => onNewPrimary.destroy())
  t.same(await onNewPrimary.lRange('items:chunk:1', 0, -1), ['a', 'b', 'kept'], 'the new primary lost the append')
  t.same(await list(), ['a', 'b', 'kept'])
})

/** Scripts the Redis behind `inspector` has run (`INFO commandstats`: EVAL and EVALSHA calls). */
async function scriptsRun(inspector: Inspector): Promise<number> {
  const stats = await inspector.info('commandstats')
  return [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((sum, [, calls]) => sum + Number(calls), 0)
}
