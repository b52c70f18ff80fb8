/**
 * The bar of docs/shutdown.md, "Measured: no request fails": a rolling restart of every replica under keep-alive load gives clients
 * that never retry zero errors, behind HAProxy checking /ready every 0.5 s (the compose
 * configuration, without its retries) in HTTP mode, behind the same balancer taking each replica
 * out 2 s before its SIGTERM (a Kubernetes endpoint with a preStop pause), and in TCP mode (each
 * client connection pinned to one replica, as kube-proxy does); nothing is lost or stored twice,
 * and every replica exits 0. 2 items-list and 3 forge-aggregator replicas (with a local fake
 * upstream), each restarted in turn with SIGTERM, as an orchestrator does, both services at once. `pnpm test:rollout`; `.ci/run` runs it
 * on its own, after `pnpm test`, so that the machine's other work does not slow it.
 */
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Agent, request } from 'undici'
import { eventually, findFreePort, startPrivateRedis, type RunningProcess } from '@repo/test-support'
import { haproxyCommand, localConfig, startHaproxy, whyNoHaproxy, type LocalTopology } from '../../src/haproxy.ts'
import { startFakeUpstream, startReplica, stop, type Replica, type ServiceName } from '../../src/replicas.ts'

/** Short, so that the test stays short: the balancer's two checks half a second apart fit in it. */
const DELAY_SECONDS = 2
const REPLICAS: Readonly<Record<ServiceName, number>> = { 'items-list': 2, 'forge-aggregator': 3 }
const CLIENTS_PER_SERVICE = 4
const LOGINS = 20

const noHaproxy = whyNoHaproxy()

interface Outcome {
  service: ServiceName
  ok: boolean
  what: string
}

/**
 * One client that never retries, on one keep-alive connection at a time: the next request only
 * once the last is answered. Records every outcome until `stopped()`.
 */
async function client(service: ServiceName, url: string, outcomes: Outcome[], stopped: () => boolean, names: string[], index: number): Promise<void> {
  const agent = new Agent({ connections: 1, keepAliveTimeout: 30_000 })
  try {
    for (let n = 0; !stopped(); n++) {
      try {
        if (service === 'items-list') {
          const name = `client-${index}-${n}`
          const response = await request(`${url}/items/`, {
            method: 'POST',
            dispatcher: agent,
            headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
            body: JSON.stringify({ name }),
          })
          await response.body.dump()
          if (response.statusCode === 201) names.push(name)
          outcomes.push({ service, ok: response.statusCode === 201, what: `POST ${name}: ${response.statusCode}` })
        } else {
          const login = `user-${(index * 7 + n) % LOGINS}`
          const response = await request(`${url}/api/forge/users?user_name=${login}`, { dispatcher: agent })
          const body = await response.body.text()
          const ok = response.statusCode === 200 && (JSON.parse(body) as { user?: { login?: string } }).user?.login === login
          outcomes.push({ service, ok, what: `GET ${login}: ${response.statusCode}` })
        }
      } catch (error) {
        outcomes.push({ service, ok: false, what: String(error) })
      }
      await sleep(10)
    }
  } finally {
    await agent.close()
  }
}

/** How many times HAProxy has said that `server` of `service` is UP. */
function timesUp(haproxy: RunningProcess, service: ServiceName, server: string): number {
  return haproxy.output().split(`Server ${service}/${server} is UP`).length - 1
}

/** How many times HAProxy has taken `server` of `service` out because its /ready answered 503. */
function timesOutOnReady(haproxy: RunningProcess, service: ServiceName, server: string): number {
  return haproxy.output().split(`Server ${service}/${server} is DOWN, reason: Layer7 wrong status, code: 503`).length - 1
}

const redis = noHaproxy ? undefined : await startPrivateRedis({ durable: false })
const upstream = noHaproxy ? undefined : await startFakeUpstream()
t.teardown(async () => {
  if (upstream) await stop(upstream.process, 'SIGKILL')
  await redis?.dispose()
})

interface Balancer {
  label: string
  mode: LocalTopology['mode']
  /**
   * Taken out of rotation by hand (HAProxy's runtime API) `TAKE_OUT_SECONDS` before its SIGTERM,
   * as a Kubernetes endpoint is removed while a preStop pause holds the signal back.
   */
  takesOutFirst: boolean
}

const BALANCERS: readonly Balancer[] = [
  { label: 'HTTP mode checking /ready every 0.5 s', mode: 'http', takesOutFirst: false },
  { label: 'HTTP mode, each replica taken out 2 s before its SIGTERM', mode: 'http', takesOutFirst: true },
  { label: 'TCP mode, each client connection pinned to a replica', mode: 'tcp', takesOutFirst: false },
]
const TAKE_OUT_SECONDS = 2

for (const [index, balancer] of BALANCERS.entries()) {
  t.test(
    `a rolling restart behind HAProxy in ${balancer.label}, without retries: no client error, nothing lost or stored twice, every replica exits 0`,
    { skip: noHaproxy },
    async (t) => {
      const env: Record<ServiceName, Record<string, string>> = {
        'items-list': { REDIS_URL: `redis://127.0.0.1:${redis!.port}`, ITEMS_KEY: `items-${index}`, SHUTDOWN_DELAY_SECONDS: String(DELAY_SECONDS) },
        'forge-aggregator': {
          FORGE_API_URL: upstream!.url,
          REDIS_URL: `redis://127.0.0.1:${redis!.port}`,
          // Answers go stale during the test: replicas revalidate with the upstream while restarting.
          FORGE_CACHE_TTL_SECONDS: '2',
          SHUTDOWN_DELAY_SECONDS: String(DELAY_SECONDS),
        },
      }
      const services = Object.keys(REPLICAS) as ServiceName[]
      const everyProcess: RunningProcess[] = []
      t.teardown(() => Promise.all(everyProcess.map((each) => stop(each, 'SIGKILL'))))
      const replicas = {} as Record<ServiceName, Replica[]>
      for (const service of services) {
        replicas[service] = await Promise.all(Array.from({ length: REPLICAS[service] }, () => startReplica(service, env[service])))
        everyProcess.push(...replicas[service].map((each) => each.process))
      }
      const socketDir = mkdtempSync(join(tmpdir(), 'haproxy-admin-'))
      t.teardown(() => rmSync(socketDir, { recursive: true, force: true }))
      const adminSocket = join(socketDir, 'admin.sock')
      const topology: LocalTopology = {
        frontends: { 'forge-aggregator': await findFreePort(), 'items-list': await findFreePort() },
        replicas: { 'forge-aggregator': replicas['forge-aggregator'].map((each) => each.port), 'items-list': replicas['items-list'].map((each) => each.port) },
        mode: balancer.mode,
        retries: false,
        adminSocket,
      }
      const haproxy = startHaproxy(localConfig(topology))
      everyProcess.push(haproxy)
      const urls = {
        'forge-aggregator': `http://127.0.0.1:${topology.frontends['forge-aggregator']}`,
        'items-list': `http://127.0.0.1:${topology.frontends['items-list']}`,
      }
      for (const url of Object.values(urls)) {
        t.ok(await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, 200), `${url} serves`)
      }

      const outcomes: Outcome[] = []
      const names: string[] = []
      let stopped = false
      const load = services.flatMap((service) =>
        Array.from({ length: CLIENTS_PER_SERVICE }, (_, number) => client(service, urls[service], outcomes, () => stopped, names, number)),
      )
      await eventually(async () => outcomes.length >= 50, 200)

      const exits: { replica: string; code: number | null }[] = []
      // Each service is its own deployment: both are restarted at once, each one replica at a time.
      const restartEvery = async (service: ServiceName) => {
        for (const [position, old] of replicas[service].entries()) {
          const server = `${service}-${position + 1}`
          const upBefore = timesUp(haproxy, service, server)
          const outBefore = timesOutOnReady(haproxy, service, server)
          const answeredBefore = outcomes.length
          if (balancer.takesOutFirst) {
            await haproxyCommand(adminSocket, `set server ${service}/${server} state maint`)
            await sleep(TAKE_OUT_SECONDS * 1000)
          }
          exits.push({ replica: server, code: await stop(old.process) })
          if (!balancer.takesOutFirst) {
            // Its port was still open when the balancer took it out: the checks saw /ready's 503, not a refused connection.
            t.ok(timesOutOnReady(haproxy, service, server) > outBefore, `${server}: out of rotation on its /ready 503 before it stopped`)
          }
          const renewed = await startReplica(service, env[service], old.port)
          replicas[service][position] = renewed
          everyProcess.push(renewed.process)
          if (balancer.takesOutFirst) await haproxyCommand(adminSocket, `set server ${service}/${server} state ready`)
          const back = await eventually(async () => timesUp(haproxy, service, server) > upBefore, 400)
          t.ok(back, `${server} restarted and back in rotation`)
          t.ok(outcomes.length > answeredBefore, `${server}: requests kept being answered meanwhile`)
        }
      }
      await Promise.all(services.map(restartEvery))
      // A moment of load on the new replicas only.
      const settled = outcomes.length
      await eventually(async () => outcomes.length >= settled + 50, 200)
      stopped = true
      await Promise.all(load)

      const byService = (service: ServiceName) => outcomes.filter((outcome) => outcome.service === service)
      for (const service of services) {
        const failed = byService(service).filter((outcome) => !outcome.ok)
        t.same(failed.slice(0, 20), [], `${service}: none of ${byService(service).length} requests failed`)
      }

      const stored = await request(`${urls['items-list']}/items/`)
      const { items } = (await stored.body.json()) as { items: string[] }
      t.equal(items.length, names.length, `every one of the ${names.length} appends answered 201 is stored`)
      t.same([...new Set(items)].sort(), [...names].sort(), 'each exactly once, and nothing else')

      for (const service of services) {
        for (const [position, replica] of replicas[service].entries()) exits.push({ replica: `${service}-${position + 1} (restarted)`, code: await stop(replica.process) })
      }
      t.same(
        exits.filter((exit) => exit.code !== 0),
        [],
        `every replica exited 0 (${exits.length} exits)`,
      )
      await stop(haproxy, 'SIGKILL')
    },
  )
}
