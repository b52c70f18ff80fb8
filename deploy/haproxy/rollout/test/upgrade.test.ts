/**
 * The bar of docs/list.md, "Upgrading from the one-list layout": items-list rolled out from
 * the last version that kept the list as one Redis list (EARLIER, run from the repository's
 * history) to this one, replica by replica behind HAProxy (compose's configuration, no retries),
 * on a durable Redis, with appends, deletes and reads flowing. Nothing is lost: every name
 * answered 201 is in the list once, every name deleted is gone, every other name is kept, in
 * order; no read answers part of the list (the earlier replicas answer 503 once it has moved, and
 * clients that retry their 503s, appends with their Idempotency-Key, get through); every replica
 * exits 0. `pnpm test:rollout`.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { createClient } from 'redis'
import { Agent, request } from 'undici'
import { eventually, findFreePort, startPrivateRedis, type RunningProcess } from '@repo/test-support'
import { checkOutEarlier } from '../../src/earlier-version.ts'
import { localConfig, startHaproxy, whyNoHaproxy } from '../../src/haproxy.ts'
import { startReplica, stop, type Replica } from '../../src/replicas.ts'

/** The last commit whose items-list kept the list as one Redis list at ITEMS_KEY. */
const EARLIER = '7f5a5b98a37edb70f0cca87864714e06dd1d025b'
const SEEDED = 20_000
const APPENDERS = 3
/** How often a client sends a request again after a 503 before it counts it a failure. */
const TRIES = 100
const nameAt = (index: number) => `s-${String(index).padStart(14, '0')}`

interface Load {
  appended: string[]
  /** Names whose delete was sent: only they may be missing from a read that ends after. */
  targeted: Set<string>
  /** Names whose delete was answered (200, or 404 after a 503), so not in the list at the end. */
  deleted: Set<string>
  failures: string[]
  reads: { whole: number; unavailable: number; partial: string[] }
  retried503s: number
}

/** Sends a request until it is answered with something else than 503 (at most TRIES times). */
async function untilNot503(load: Load, send: () => Promise<{ statusCode: number; body: { dump(): Promise<void> } }>): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const response = await send()
    await response.body.dump()
    if (response.statusCode !== 503 || attempt === TRIES) return response.statusCode
    load.retried503s++
    await sleep(20)
  }
}

async function appender(url: string, index: number, load: Load, stopped: () => boolean): Promise<void> {
  const agent = new Agent({ connections: 1 })
  for (let n = 0; !stopped(); n++) {
    const name = `appended ${index}.${n}`
    const key = randomUUID()
    const status = await untilNot503(load, () =>
      request(`${url}/items/`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify({ name }) }),
    ).catch((error: unknown) => String(error))
    if (status === 201) load.appended.push(name)
    else load.failures.push(`POST ${name}: ${status}`)
  }
  await agent.close()
}

/** Deletes seeded names, a different one each time, spread over the whole list. */
async function deleter(url: string, load: Load, stopped: () => boolean): Promise<void> {
  const agent = new Agent({ connections: 1 })
  for (let n = 1; !stopped(); n++) {
    const name = nameAt((n * 7919) % SEEDED)
    load.targeted.add(name)
    let retried = false
    const status = await untilNot503(load, async () => {
      const response = await request(`${url}/items/${name}`, { method: 'DELETE', dispatcher: agent })
      retried ||= response.statusCode === 503
      return response
    }).catch((error: unknown) => String(error))
    if (status === 200 || (status === 404 && retried)) load.deleted.add(name)
    else load.failures.push(`DELETE ${name}: ${status}`)
  }
  await agent.close()
}

/** Reads the whole list again and again: each 200 must hold every seeded name no delete aimed at, in order. */
async function reader(url: string, load: Load, stopped: () => boolean): Promise<void> {
  const agent = new Agent({ connections: 1 })
  while (!stopped()) {
    const response = await request(`${url}/items/`, { dispatcher: agent })
    if (response.statusCode !== 200) {
      await response.body.dump()
      load.reads.unavailable++
      continue
    }
    const { items } = (await response.body.json()) as { items: string[] }
    const present = new Set(items)
    const missing = Array.from({ length: SEEDED }, (_, index) => nameAt(index)).filter((name) => !present.has(name) && !load.targeted.has(name))
    if (missing.length > 0) load.reads.partial.push(`${items.length} names, without ${missing.slice(0, 3).join(', ')}…`)
    else load.reads.whole++
  }
  await agent.close()
}

t.test(
  'an upgrade from the one-list layout, rolled out behind HAProxy with appends, deletes and reads flowing, keeps every name once and in order and answers no partial list',
  { skip: whyNoHaproxy() },
  async (t) => {
    const earlier = await checkOutEarlier(EARLIER)
    t.teardown(() => earlier.dispose())
    const redis = await startPrivateRedis()
    t.teardown(() => redis.dispose())
    const inspector = await createClient({ socket: { host: '127.0.0.1', port: redis.port } }).connect()
    t.teardown(() => inspector.destroy())
    for (let start = 0; start < SEEDED; start += 1000) await inspector.rPush('items', Array.from({ length: 1000 }, (_, index) => nameAt(start + index)))

    const env = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, SHUTDOWN_DELAY_SECONDS: '2' }
    const processes: RunningProcess[] = []
    t.teardown(() => Promise.all(processes.map((each) => stop(each, 'SIGKILL'))))
    const replicas: Replica[] = await Promise.all([0, 1].map(() => startReplica('items-list', env, undefined, earlier.serviceRoot('items-list'))))
    processes.push(...replicas.map((each) => each.process))
    const frontend = await findFreePort()
    const haproxy = startHaproxy(localConfig({ frontends: { 'items-list': frontend, 'forge-aggregator': await findFreePort() }, replicas: { 'items-list': replicas.map((each) => each.port), 'forge-aggregator': [await findFreePort()] }, mode: 'http', retries: false }))
    processes.push(haproxy)
    const url = `http://127.0.0.1:${frontend}`
    t.ok(await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, 200), 'the earlier version serves')

    const load: Load = { appended: [], targeted: new Set(), deleted: new Set(), failures: [], reads: { whole: 0, unavailable: 0, partial: [] }, retried503s: 0 }
    let stopped = false
    const clients = [...Array.from({ length: APPENDERS }, (_, index) => appender(url, index, load, () => stopped)), deleter(url, load, () => stopped), reader(url, load, () => stopped)]
    t.ok(await eventually(async () => load.appended.length >= 30 && load.reads.whole >= 1, 200), 'appends, deletes and reads on the earlier version')

    const exits: (number | null)[] = []
    for (const [position, old] of replicas.entries()) {
      const server = `items-list-${position + 1}`
      const upBefore = haproxy.output().split(`Server items-list/${server} is UP`).length - 1
      exits.push(await stop(old.process))
      const renewed = await startReplica('items-list', env, old.port)
      processes.push(renewed.process)
      replicas[position] = renewed
      t.ok(await eventually(async () => haproxy.output().split(`Server items-list/${server} is UP`).length - 1 > upBefore, 400), `${server}: upgraded and back in rotation`)
    }
    t.ok(await eventually(async () => (await inspector.exists('items:legacy')) === 0 && (await inspector.type('items')) === 'zset', 400), 'the list is all in chunks')
    const appendedBefore = load.appended.length
    t.ok(await eventually(async () => load.appended.length >= appendedBefore + 30, 200), 'and serves on')
    stopped = true
    await Promise.all(clients)

    t.same(load.failures.slice(0, 10), [], `every append and delete got through (${load.retried503s} 503s retried)`)
    t.same(load.reads.partial.slice(0, 3), [], `no read answered part of the list (${load.reads.whole} whole, ${load.reads.unavailable} 503)`)
    const { items } = (await (await fetch(`${url}/items/`)).json()) as { items: string[] }
    const seeded = Array.from({ length: SEEDED }, (_, index) => nameAt(index))
    t.same(
      items.filter((name) => name.startsWith('s-')),
      seeded.filter((name) => !load.deleted.has(name)),
      `every seeded name not deleted, in order (${load.deleted.size} deleted)`,
    )
    t.same(
      items.filter((name) => !name.startsWith('s-')).toSorted(),
      load.appended.toSorted(),
      `every one of the ${load.appended.length} appends answered 201, once, and nothing else`,
    )
    for (const replica of replicas) exits.push(await stop(replica.process))
    t.same(exits, [0, 0, 0, 0], 'every replica, earlier and new, exited 0')
  },
)
