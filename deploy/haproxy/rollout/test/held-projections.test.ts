/**
 * The rollout bar of issue 43 (docs/design.md, "Rollouts and stored entries"): forge-aggregator
 * rolled out from the last version that held whole upstream bodies (EARLIER, run from the
 * repository's history) to this one, which holds projections in the same `v2` namespace, replica
 * by replica behind HAProxy (compose's configuration, no retries), on one private Redis, with
 * users and repos requests flowing and a TTL short enough that both versions revalidate each
 * other's held entries. The upstream is bench/stateful-upstream.ts served over HTTP from this
 * process, so the test changes its state (a star on every account) mid-rollout.
 *
 * No client gets a 5xx or an error; every answer is the one a replica of the earlier version
 * without a cache gives for the upstream's state, before the star or after it (before it only within the TTL after the
 * star); each version revalidated entries the other wrote (the new one's 304s turned the old
 * one's entries into projections under the same ETag; the old one answered from 304s while
 * projections were held) and no version ever failed to read an entry (no unconditional call
 * after the cold ones); every replica exits 0. `pnpm test:rollout`.
 */
import t from 'tap'
import { createServer, type Server } from 'node:http'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { createClient } from 'redis'
import { Agent, request, type Dispatcher } from 'undici'
import { eventually, findFreePort, startPrivateRedis, type RunningProcess } from '@repo/test-support'
import { createStatefulUpstream, UPSTREAM_ORIGIN } from '../../../../services/forge-aggregator/bench/stateful-upstream.ts'
import { checkOutEarlier } from '../../src/earlier-version.ts'
import { localConfig, startHaproxy, whyNoHaproxy } from '../../src/haproxy.ts'
import { startReplica, stop, type Replica } from '../../src/replicas.ts'

/** The last main before held projections (issue 43): it held `{etag, text}`, the whole body. */
const EARLIER = 'a542e350eeb7c5532e92916fd1c5a0e8d17ddacb'
const REPLICAS = 3
const CLIENTS = 4
const LOGINS = Array.from({ length: 12 }, (_, index) => `rollout-${index}`)
/** Also the default user, whose repository list `/api/forge/repos` answers. */
const DEFAULT_USER = LOGINS[0]!
const TTL_SECONDS = 2
/**
 * How long past the star plus the TTL an answer made before the star may still be sent: the
 * production that read the upstream just before the star may take this long on a busy machine.
 */
const SLACK_MS = 3_000

const pathsOf = (login: string) => [`/api/forge/users?user_name=${login}`, ...(login === DEFAULT_USER ? ['/api/forge/repos'] : [])]
const PATHS = LOGINS.flatMap(pathsOf)

/** What the upstream answered the service's calls (a 304 is a held entry reused). */
interface Calls {
  notModified: number
  conditional200: number
  unconditional200: number
}

/** The stateful upstream's mock, served over HTTP on 127.0.0.1 for replicas in other processes; counts what it answers. */
async function serveOverHttp(dispatcher: Dispatcher): Promise<{ url: string; calls: Calls; server: Server }> {
  const calls: Calls = { notModified: 0, conditional200: 0, unconditional200: 0 }
  const server = createServer((incoming, outgoing) => {
    const condition = incoming.headers['if-none-match']
    dispatcher
      .request({ origin: UPSTREAM_ORIGIN, path: incoming.url ?? '/', method: 'GET', headers: condition === undefined ? {} : { 'if-none-match': condition } })
      .then(async (answer) => {
        const body = Buffer.from(await answer.body.arrayBuffer())
        const isResource = !(incoming.url ?? '').startsWith('/search/')
        if (answer.statusCode === 304) calls.notModified++
        else if (answer.statusCode === 200 && isResource) calls[condition === undefined ? 'unconditional200' : 'conditional200']++
        const headers = Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(name)))
        outgoing.writeHead(answer.statusCode, headers as Record<string, string>).end(body)
      })
      .catch((error: unknown) => outgoing.writeHead(599).end(String(error)))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { url: `http://127.0.0.1:${address.port}`, calls, server }
}

/** The upstream calls a replica has answered 304, from its /metrics (0 when it no longer answers). */
async function notModifiedOf(replica: Replica): Promise<number> {
  const page = await (await fetch(`http://127.0.0.1:${replica.port}/metrics`)).text()
  return [...page.matchAll(/^forge_upstream_requests_total\{[^}]*status="304"[^}]*\} (\d+)$/gm)].reduce((total, [, count]) => total + Number(count), 0)
}

/** How many times HAProxy has said that `server` is UP. */
const timesUp = (haproxy: RunningProcess, server: string) => haproxy.output().split(`Server forge-aggregator/${server} is UP`).length - 1

interface Answer {
  path: string
  status: number | string
  body: string
  sentAt: number
  answeredAt: number
}

async function client(url: string, index: number, answers: Answer[], stopped: () => boolean): Promise<void> {
  const agent = new Agent({ connections: 1, keepAliveTimeout: 30_000 })
  try {
    for (let n = index; !stopped(); n++) {
      const path = PATHS[n % PATHS.length]!
      const sentAt = Date.now()
      try {
        const response = await request(`${url}${path}`, { dispatcher: agent })
        answers.push({ path, status: response.statusCode, body: await response.body.text(), sentAt, answeredAt: Date.now() })
      } catch (error) {
        answers.push({ path, status: String(error), body: '', sentAt, answeredAt: Date.now() })
      }
      await sleep(10)
    }
  } finally {
    await agent.close()
  }
}

t.test(
  'forge-aggregator rolled out from whole held bodies to held projections behind HAProxy, under users and repos requests and a change upstream: no 5xx, every answer the upstream state’s, each version reusing what the other held, every replica exits 0',
  { skip: whyNoHaproxy() },
  async (t) => {
    const earlier = await checkOutEarlier(EARLIER)
    t.teardown(() => earlier.dispose())
    const redis = await startPrivateRedis({ durable: false })
    t.teardown(() => redis.dispose())
    const inspector = await createClient({ socket: { host: '127.0.0.1', port: redis.port } }).connect()
    t.teardown(() => inspector.destroy())
    const upstream = createStatefulUpstream()
    t.teardown(() => upstream.close())
    const served = await serveOverHttp(upstream.dispatcher)
    // A second door on the same state for the reference replica, so that its calls are not counted with the rollout's.
    const referenceDoor = await serveOverHttp(upstream.dispatcher)
    t.teardown(() => {
      for (const { server } of [served, referenceDoor]) {
        server.closeAllConnections()
        server.close()
      }
    })

    const processes: RunningProcess[] = []
    t.teardown(() => Promise.all(processes.map((each) => stop(each, 'SIGKILL'))))
    // What the upstream's state gives: the version before projections (the answers must not move),
    // with no Redis and a TTL of 0 (every request revalidates), so that no bug of the new one is in it.
    const reference = await startReplica(
      'forge-aggregator',
      { FORGE_API_URL: referenceDoor.url, FORGE_DEFAULT_USER: DEFAULT_USER, FORGE_CACHE_TTL_SECONDS: '0', SHUTDOWN_DELAY_SECONDS: '0' },
      undefined,
      earlier.serviceRoot('forge-aggregator'),
    )
    processes.push(reference.process)
    const expectedNow = async () => {
      const bodies = new Map<string, string>()
      for (const path of PATHS) {
        const response = await request(`http://127.0.0.1:${reference.port}${path}`)
        const body = await response.body.text()
        if (response.statusCode !== 200) throw new Error(`the reference answered ${path} with ${response.statusCode}: ${body}`)
        bodies.set(path, body)
      }
      return bodies
    }
    const before = await expectedNow()

    const env = {
      FORGE_API_URL: served.url,
      FORGE_DEFAULT_USER: DEFAULT_USER,
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      FORGE_CACHE_TTL_SECONDS: String(TTL_SECONDS),
      SHUTDOWN_DELAY_SECONDS: '2',
    }
    const replicas: Replica[] = await Promise.all(Array.from({ length: REPLICAS }, () => startReplica('forge-aggregator', env, undefined, earlier.serviceRoot('forge-aggregator'))))
    processes.push(...replicas.map((each) => each.process))
    const frontend = await findFreePort()
    const haproxy = startHaproxy(
      localConfig({
        frontends: { 'forge-aggregator': frontend, 'items-list': await findFreePort() },
        replicas: { 'forge-aggregator': replicas.map((each) => each.port), 'items-list': [await findFreePort()] },
        mode: 'http',
        retries: false,
      }),
    )
    processes.push(haproxy)
    const url = `http://127.0.0.1:${frontend}`
    t.ok(await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, 200), 'the earlier version serves')

    const answers: Answer[] = []
    let stopped = false
    const clients = Array.from({ length: CLIENTS }, (_, index) => client(url, index, answers, () => stopped))
    const oldNotModified = async () => (await Promise.all(replicas.map(notModifiedOf))).reduce((total, count) => total + count, 0)
    t.ok(
      await eventually(async () => PATHS.every((path) => answers.some((answer) => answer.path === path)) && (await oldNotModified()) > 0, 200),
      'every account answered by the earlier version, which revalidates its own held bodies',
    )

    /** Every held entry in Redis: its ETag, and whether it is a projection (has a shape). */
    const heldEntries = async () => {
      const entries = new Map<string, { etag: string; projection: boolean }>()
      for await (const keys of inspector.scanIterator({ MATCH: 'forge:v2:*:held:*', COUNT: 1000 })) {
        for (const key of keys) {
          const text = await inspector.get(key)
          if (text === null) continue
          const entry = JSON.parse(text) as { etag: string; shape?: string }
          entries.set(key, { etag: entry.etag, projection: entry.shape !== undefined })
        }
      }
      return entries
    }

    const notModified = { earlier: 0, new: 0 }
    let earlierNotModifiedBeforeMixing = 0
    let writtenByEarlier = new Map<string, { etag: string; projection: boolean }>()
    let coldCalls = 0
    let starredAt = Number.POSITIVE_INFINITY
    let projectionsWhenLastEarlierStopped = ''
    const exits: (number | null)[] = []
    for (const [position, old] of replicas.entries()) {
      const server = `forge-aggregator-${position + 1}`
      const upBefore = timesUp(haproxy, server)
      notModified.earlier += await notModifiedOf(old)
      if (position === 0) {
        earlierNotModifiedBeforeMixing = await oldNotModified()
        writtenByEarlier = await heldEntries()
        coldCalls = served.calls.unconditional200
      }
      if (position === REPLICAS - 1) {
        const entries = [...(await heldEntries()).values()]
        projectionsWhenLastEarlierStopped = `${entries.filter((entry) => entry.projection).length} of ${entries.length}`
      }
      exits.push(await stop(old.process))
      const renewed = await startReplica('forge-aggregator', env, old.port)
      processes.push(renewed.process)
      replicas[position] = renewed
      t.ok(await eventually(async () => timesUp(haproxy, server) > upBefore, 400), `${server}: the new version, in rotation`)
      if (position === 1) {
        // Both versions serve: the state changes, so that an answer kept past its TTL, or a held
        // entry reused after the upstream changed, would be seen.
        await sleep(TTL_SECONDS * 1000)
        starredAt = Date.now()
        for (const login of LOGINS) upstream.star(login, () => 0)
      }
      // Every account goes stale at least once with this replica in rotation.
      await sleep(TTL_SECONDS * 1000 + 1000)
    }
    const after = await expectedNow()
    // The new version alone, past the star's TTL.
    await sleep(TTL_SECONDS * 1000 + SLACK_MS)
    stopped = true
    await Promise.all(clients)
    for (const replica of replicas) notModified.new += await notModifiedOf(replica)
    const held = await heldEntries()

    const failed = answers.filter((answer) => answer.status !== 200)
    t.same(
      failed.slice(0, 10).map((answer) => `${answer.path}: ${answer.status} ${answer.body.slice(0, 200)}`),
      [],
      `no 5xx, no error: every one of ${answers.length} answers was a 200 (${answers.filter((answer) => typeof answer.status === 'number' && answer.status >= 500).length} 5xx)`,
    )
    const wrong: string[] = []
    let beforeCount = 0
    let afterCount = 0
    for (const answer of answers.filter((each) => each.status === 200)) {
      if (answer.body === after.get(answer.path) && answer.answeredAt >= starredAt) afterCount++
      else if (answer.body === before.get(answer.path) && answer.sentAt < starredAt + TTL_SECONDS * 1000 + SLACK_MS) beforeCount++
      else wrong.push(`${answer.path}, sent ${answer.sentAt - starredAt} ms after the star: ${answer.body === before.get(answer.path) ? 'the state before the star' : answer.body.slice(0, 300)}`)
    }
    t.same(wrong.slice(0, 5), [], `every answer is the upstream's state: ${beforeCount} before the star, ${afterCount} after it, ${wrong.length} neither`)
    t.ok(afterCount > 0 && beforeCount > 0, 'answers of both states were seen')

    const converted = [...writtenByEarlier].filter(([key, entry]) => !entry.projection && held.get(key)?.projection === true && held.get(key)?.etag === entry.etag)
    t.ok(writtenByEarlier.size > 0 && [...writtenByEarlier.values()].every((entry) => !entry.projection), `when the first new replica started, Redis held ${writtenByEarlier.size} entries, all whole bodies written by the earlier version`)
    t.ok(converted.length > 0, `the new version revalidated ${converted.length} of them (a 304 turns one into a projection under the same ETag)`)
    t.ok(
      notModified.earlier > earlierNotModifiedBeforeMixing,
      `the earlier version had ${notModified.earlier - earlierNotModifiedBeforeMixing} upstream 304s while new replicas wrote projections (${projectionsWhenLastEarlierStopped} held entries were projections as the last one stopped)`,
    )
    t.ok(notModified.new > 0, `the new version had ${notModified.new} upstream 304s`)
    t.equal(
      served.calls.unconditional200 - coldCalls,
      0,
      `no version failed to read a held entry: ${served.calls.unconditional200 - coldCalls} unconditional calls after the ${coldCalls} cold ones (${served.calls.notModified} 304s, ${served.calls.conditional200} conditional 200s in all)`,
    )
    t.comment(`answers: ${answers.length}; upstream 304s by version (from each replica's /metrics, before its SIGTERM): earlier ${notModified.earlier}, new ${notModified.new}`)

    for (const replica of replicas) exits.push(await stop(replica.process))
    t.same(exits, Array.from({ length: REPLICAS * 2 }, () => 0), 'every replica, earlier and new, exited 0')
  },
)
