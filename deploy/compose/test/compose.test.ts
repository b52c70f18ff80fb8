/**
 * docker-compose.yml as operators run it: both images built from their Dockerfiles in a real
 * Docker engine, the file as it is (compose.test.yml adds only the fake upstream and free ports),
 * every request through HAProxy. The scenarios run in order on one stack, as an operator's day
 * would: up, serve, scale, restart every replica under load, restart and kill Redis, fill it.
 * `pnpm test:compose`; `.ci/run` runs it last, once it has started a Docker engine.
 */
import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { createClient } from 'redis'
import { request } from 'undici'
import { answerWithoutLogin, eventually } from '@repo/test-support'
import { serversInRotation } from '../../haproxy/src/server-states.ts'
import { SERVICES } from '../../kubernetes/src/services.ts'
import { SLOW_LOGIN_PREFIX, SLOW_PROFILE_MS, startFakeGitHub } from '../src/fake-github.ts'
import { devDependenciesIn, readBundle, unlocked } from '../src/bundle.ts'
import { startLoad } from '../src/load.ts'
import { defineStack, REPO_ROOT, type ServiceName } from '../src/stack.ts'

const execFileText = promisify(execFile)

const fakeGitHub = await startFakeGitHub()
const stack = await defineStack(fakeGitHub.port)
const { urls, secrets } = stack

/** How long each step took, for the run's summary. */
const timings: string[] = []
async function timed<T>(step: string, run: () => Promise<T>): Promise<T> {
  const started = performance.now()
  try {
    return await run()
  } finally {
    timings.push(`${step}: ${((performance.now() - started) / 1000).toFixed(1)} s`)
  }
}

t.teardown(async () => {
  t.comment(`steps: ${timings.join('; ')}`)
  await stack.compose('down', '--volumes', '--remove-orphans', '--timeout', '1').catch(() => {})
  await fakeGitHub.close()
})

// What an operator's checkout holds beside the sources: .env with the Redis passwords and the
// token, the GitHub App's key. Planted where absent, so that a build that took them in would
// show; a developer's own files are left as they are.
const planted: string[] = []
const appKeyMarker = `-----BEGIN PRIVATE KEY-----\n${randomBytes(32).toString('base64')}\n-----END PRIVATE KEY-----\n`
for (const [file, content] of [
  ['.env', Object.entries(secrets).map(([name, value]) => `${name}=${value}\n`).join('')],
  ['secrets/forge-app.pem', appKeyMarker],
] as const) {
  const path = join(REPO_ROOT, file)
  if (existsSync(path)) continue
  await mkdir(join(path, '..'), { recursive: true })
  await writeFile(path, content, { mode: 0o600 })
  planted.push(path)
}
t.teardown(() => Promise.all(planted.map((path) => rm(path, { force: true }))))

await stack.compose('down', '--volumes', '--remove-orphans', '--timeout', '1')
await timed('base images', () => execFileText('bash', [join(REPO_ROOT, 'deploy/compose/base-images/build.sh'), process.execPath], { maxBuffer: 64 * 1024 * 1024 }))
await timed('images built from the Dockerfiles', () => stack.compose('build'))
await timed('up, healthy', () => stack.compose('up', '--detach', '--wait'))

/** A request through HAProxy; resolves with the status and the parsed body. */
async function call(service: ServiceName, path: string, init: { method?: 'GET' | 'POST' | 'DELETE'; headers?: Record<string, string>; json?: unknown } = {}) {
  const answer = await request(`${urls[service]}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...init.headers, ...(init.json === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  })
  const text = await answer.body.text()
  return { status: answer.statusCode, headers: answer.headers, body: text === '' ? undefined : (JSON.parse(text) as unknown) }
}

/** POSTs `name` to the list through HAProxy, with `key` as its Idempotency-Key when given. */
async function append(name: string, key?: string) {
  return call('items-list', '/items/', { method: 'POST', json: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })
}

/** How many times each name is in the list, read through HAProxy. */
async function countsInList(): Promise<Map<string, number>> {
  const { status, body } = await call('items-list', '/items/')
  if (status !== 200) throw new Error(`GET /items/ answered ${status}`)
  const counts = new Map<string, number>()
  for (const name of (body as { items: string[] }).items) counts.set(name, (counts.get(name) ?? 0) + 1)
  return counts
}

/** The names of `names` that are not in the list exactly once. */
async function notStoredOnce(names: readonly string[]): Promise<string[]> {
  const counts = await countsInList()
  return names.filter((name) => counts.get(name) !== 1)
}

/** The container's address on the stack's network, where the host reaches it directly. */
async function addressOf(container: string): Promise<{ ip: string; gateway: string }> {
  const network = (await stack.inspect(container)).NetworkSettings.Networks[`${stack.project}_default`]
  if (!network) throw new Error(`${container} is not on the stack's network`)
  return { ip: network.IPAddress, gateway: network.Gateway }
}

/** The access line of the request with this X-Request-Id in any container of `service`, once written (logs are flushed each second). */
async function accessLine(service: ServiceName, requestId: string): Promise<Record<string, unknown> | undefined> {
  let found: Record<string, unknown> | undefined
  await eventually(async () => {
    for (const container of await stack.containers(service)) {
      const line = (await stack.logs(container)).split('\n').find((each) => each.includes(`"reqId":"${requestId}"`) && each.includes('request completed'))
      if (line) found = JSON.parse(line) as Record<string, unknown>
    }
    return found !== undefined
  }, 100)
  return found
}

/** Each service's port inside its containers, where the host reaches a replica directly. */
const PORT: Readonly<Record<ServiceName, number>> = { 'forge-aggregator': 3000, 'items-list': 8080 }

/** What a replica's own /ready answers at `ip` (0 when nothing answers). */
async function readyAt(service: ServiceName, ip: string): Promise<number> {
  return request(`http://${ip}:${PORT[service]}/ready`).then(
    async (res) => (await res.body.dump(), res.statusCode),
    () => 0,
  )
}

/** How many of `service`'s replicas HAProxy has in rotation, as its log says. */
async function serversUp(service: ServiceName): Promise<number> {
  const [haproxy] = await stack.containers('haproxy')
  return serversInRotation(await stack.logs(haproxy!), service)
}

/** A cheap request each service logs, for telling which replica HAProxy sent it to. */
const PROBE_PATH: Readonly<Record<ServiceName, string>> = { 'forge-aggregator': '/api/forge/users?user_name=mona', 'items-list': '/items/' }

/**
 * Whether a restarted replica answers /ready 200 and HAProxy sends it requests, within two
 * minutes. Traffic is the proof, not HAProxy's log: requests through HAProxy, each with its own
 * X-Request-Id, until one shows in the replica's own log (round robin reaches it within a few
 * unless it is out of rotation). A fresh start takes seconds on a busy machine, and HAProxy's
 * checks time out there too. When it never comes, what was last seen says which half failed.
 */
async function backInRotation(service: ServiceName, replica: string, ip: string, replicas: number): Promise<{ ok: boolean; seen: string }> {
  const deadline = performance.now() + 120_000
  let seen = ''
  do {
    const ready = await readyAt(service, ip)
    if (ready === 200) {
      const ids = Array.from({ length: 2 * replicas }, () => randomUUID())
      for (const id of ids) await call(service, PROBE_PATH[service], { headers: { 'x-request-id': id } }).catch(() => undefined)
      // Logs are flushed each second.
      const served = await eventually(async () => {
        const log = await stack.logs(replica)
        return ids.some((id) => log.includes(`"reqId":"${id}"`))
      }, 8, 250)
      if (served) return { ok: true, seen }
    }
    const [haproxy] = await stack.containers('haproxy')
    const changes = (await stack.logs(haproxy!)).split('\n').filter((line) => line.startsWith(`Server ${service}/`))
    seen = `/ready at ${ip}: ${ready}; HAProxy's last changes of state:\n${changes.slice(-12).join('\n')}`
    await sleep(200)
  } while (performance.now() < deadline)
  return { ok: false, seen }
}

t.test('the stack comes up healthy: both services, both Redis servers, and HAProxy in front', async (t) => {
  for (const service of ['forge-aggregator', 'items-list', 'redis', 'redis-cache', 'haproxy']) {
    const [container] = await stack.containers(service)
    t.ok(container, `${service} runs`)
    const { State } = await stack.inspect(container!)
    t.equal(State.Status, 'running', service)
    if (State.Health) t.equal(State.Health.Status, 'healthy', service)
  }
})

t.test('each image holds its compiled service and production dependencies only, at the lockfile’s versions, and runs node dist/server.js as production', async (t) => {
  for (const service of ['forge-aggregator', 'items-list'] as const) {
    const contents = await readBundle(stack, service)
    t.ok(contents.hasServer, `${service}: dist/server.js`)
    t.notOk(contents.hasSources, `${service}: no TypeScript sources`)
    t.same(await devDependenciesIn(contents, service), [], `${service}: no devDependency of the service or the repository`)
    t.same(await unlocked(contents), [], `${service}: every package at the version pnpm-lock.yaml holds`)
    t.ok(Object.keys(contents.workspaceResolutions).length > 0, `${service}: uses workspace packages`)
    for (const [name, url] of Object.entries(contents.workspaceResolutions)) {
      t.match(url, /^file:\/\/\/app\/node_modules\/.+\/dist\/index\.js$/, `${service}: ${name} is a built copy inside the image`)
    }
    const [{ Config }] = JSON.parse(await stack.docker('image', 'inspect', `${stack.project}-${service}`)) as [{ Config: { Cmd: string[]; Env: string[]; User: string } }]
    t.same(Config.Cmd, ['node', 'dist/server.js'], `${service}: exec form, so that node gets the stop signal itself`)
    t.ok(Config.Env.includes('NODE_ENV=production'), `${service}: NODE_ENV=production`)
  }
})

t.test('through HAProxy, items-list appends, lists and deletes, and the aggregator answers users and repos in both modes with the token', async (t) => {
  const added = await append('compose apple')
  t.same([added.status, added.body], [201, { message: 'Item added successfully' }])
  await append('compose apple')
  t.equal((await countsInList()).get('compose apple'), 2)
  const deleted = await call('items-list', '/items/compose%20apple', { method: 'DELETE' })
  t.same([deleted.status, deleted.body], [200, { message: 'Item compose apple deleted successfully' }])
  t.equal((await countsInList()).get('compose apple'), undefined)

  const users = await call('forge-aggregator', '/api/forge/users?user_name=mona')
  t.equal(users.status, 200)
  t.match(users.body, { user: { login: 'mona' }, stats: { totalIssues: Number, totalPRs: Number }, followers: Array, topRepos: Array })
  const one = await call('forge-aggregator', '/api/forge/repos?repo_name=Hello-World')
  t.same([one.status, Object.keys(one.body as object).sort()], [200, ['forksCount', 'stars']])
  const list = await call('forge-aggregator', '/api/forge/repos')
  t.equal(list.status, 200)
  t.match(list.body, { repos: [{ fullName: `${stack.defaultUser}/Hello-World` }], totalCount: 1 })

  const asked = fakeGitHub.requests.filter(({ url }) => url.startsWith('/users/mona') || url.startsWith(`/repos/${stack.defaultUser}/`))
  t.ok(asked.length >= 4, 'the answers came from the upstream')
  t.ok(asked.every(({ authorization }) => authorization === `Bearer ${secrets.FORGE_TOKEN}`), 'with the token of the environment')
})

t.test('every container is hardened: read-only root, no capability, no new privileges, a memory limit; none runs as root', async (t) => {
  const users: Record<string, string> = { 'forge-aggregator': 'node', 'items-list': 'node', redis: 'redis', 'redis-cache': 'redis', haproxy: 'haproxy' }
  for (const [service, user] of Object.entries(users)) {
    const [container] = await stack.containers(service)
    const { HostConfig, Config } = await stack.inspect(container!)
    t.equal(HostConfig.ReadonlyRootfs, true, `${service}: read-only root filesystem`)
    t.same(HostConfig.CapDrop, ['ALL'], `${service}: every capability dropped`)
    t.same(HostConfig.CapAdd ?? [], [], `${service}: none added`)
    t.ok(HostConfig.SecurityOpt?.includes('no-new-privileges:true'), `${service}: no new privileges`)
    t.equal(HostConfig.Privileged, false, `${service}: not privileged`)
    t.ok(HostConfig.Memory > 0, `${service}: memory limited (${HostConfig.Memory / 2 ** 20} MiB)`)
    t.equal(Config.User, user, `${service}: runs as ${user}`)
    t.equal((await stack.docker('exec', container!, 'id', '-u')).trim() === '0', false, `${service}: its process is not root`)
  }
  const [aggregator] = await stack.containers('forge-aggregator')
  const limitMiB = (await stack.inspect(aggregator!)).HostConfig.Memory / 2 ** 20
  const peakMiB = SERVICES['forge-aggregator']!.peakMemoryMiB!({ FORGE_CACHE_MAX_MB: 64 })
  t.ok(limitMiB >= 1.5 * peakMiB, `the aggregator's ${limitMiB} MiB hold 1.5 × its measured peak with the default cache (${Math.ceil(peakMiB)} MiB)`)
})

t.test('a client that has not logged in gets nothing from either Redis, and each service’s user is refused on the other’s keys', async (t) => {
  const [redis] = await stack.containers('redis')
  const [cache] = await stack.containers('redis-cache')
  const durable = (await addressOf(redis!)).ip
  const cached = (await addressOf(cache!)).ip
  for (const host of [durable, cached]) {
    for (const command of ['PING', 'GET items', 'KEYS *', 'FLUSHALL']) t.match(await answerWithoutLogin(6379, command, host), /^-NOAUTH/, `${host}: ${command}`)
    t.match(await answerWithoutLogin(6379, 'AUTH default anything', host), /^-WRONGPASS/, `${host}: nobody is the default user`)
  }
  const as = async (host: string, username: string, password: string) => {
    const client = await createClient({ socket: { host, port: 6379, reconnectStrategy: false }, username, password }).connect()
    t.teardown(() => client.destroy())
    return client
  }
  const itemsList = await as(durable, 'items-list', secrets.ITEMS_LIST_REDIS_PASSWORD)
  t.ok(Array.isArray(await itemsList.zRange('items', 0, -1)), 'items-list reads its list (the index of its chunks)')
  await t.rejects(itemsList.get('forge:anything'), /NOPERM/)
  await t.rejects(itemsList.sendCommand(['FLUSHALL']), /NOPERM/)
  const aggregator = await as(cached, 'forge-aggregator', secrets.FORGE_AGGREGATOR_REDIS_PASSWORD)
  await t.rejects(aggregator.zRange('items', 0, -1), /NOPERM/)
  await t.rejects(aggregator.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']), /NOPERM/)
  await t.rejects(as(durable, 'items-list', secrets.FORGE_AGGREGATOR_REDIS_PASSWORD), /WRONGPASS/, 'one service’s password does not open the other’s user')
})

t.test('the access lines show the client’s address through HAProxy; an X-Forwarded-For from the client or another container is not believed', async (t) => {
  const [itemsList] = await stack.containers('items-list')
  const { gateway } = await addressOf(itemsList!)
  const throughHaproxy = randomUUID()
  await call('items-list', '/items/', { headers: { 'x-request-id': throughHaproxy, 'x-forwarded-for': '203.0.113.7' } })
  // The test's requests reach HAProxy from the network's gateway: that is the client here.
  t.match(await accessLine('items-list', throughHaproxy), { remoteAddress: gateway }, 'the client, not HAProxy, and not what it claimed')

  const [aggregator] = await stack.containers('forge-aggregator')
  const direct = randomUUID()
  const script = `fetch('http://items-list:8080/items/', { headers: { 'x-request-id': '${direct}', 'x-forwarded-for': '203.0.113.8' } }).then((res) => process.exit(res.ok ? 0 : 1))`
  await stack.docker('exec', aggregator!, 'node', '-e', script)
  t.match(await accessLine('items-list', direct), { remoteAddress: (await addressOf(aggregator!)).ip }, 'a container that is not HAProxy is taken at its own address')
})

t.test('scaled to 3 aggregators and 2 items-lists, HAProxy sends traffic to every replica', async (t) => {
  await timed('scale to 3 + 2', () => stack.compose('up', '--detach', '--wait', '--scale', 'forge-aggregator=3', '--scale', 'items-list=2'))
  for (const service of ['forge-aggregator', 'items-list'] as const) {
    const replicas = await stack.containers(service)
    t.equal(replicas.length, service === 'forge-aggregator' ? 3 : 2, `${service} replicas`)
    t.ok(await eventually(async () => (await serversUp(service)) === replicas.length, 150, 200), `HAProxy has every ${service} replica in rotation`)
    const ids = Array.from({ length: 30 }, () => randomUUID())
    for (const id of ids) await call(service, service === 'items-list' ? '/items/' : '/api/forge/users?user_name=mona', { headers: { 'x-request-id': id } })
    const served = await eventually(async () => {
      const logs = await Promise.all(replicas.map((replica) => stack.logs(replica)))
      return logs.every((log) => ids.some((id) => log.includes(`"reqId":"${id}"`)))
    }, 100)
    t.ok(served, `every ${service} replica answered some of 30 requests`)
  }
})

t.test('each replica restarted in turn under keep-alive load: no request fails, each exits 0, every 201 is stored once', async (t) => {
  const load = startLoad(urls)
  const exits: string[] = []
  await timed('rolling restart of 5 replicas', async () => {
    for (const service of ['items-list', 'forge-aggregator'] as const) {
      const replicas = await stack.containers(service)
      for (const replica of replicas) {
        const { ip } = await addressOf(replica)
        const stopping = stack.docker('stop', replica)
        // An answer still being produced when Docker's default 10 s would have run out: it comes
        // in late in the drain and waits SLOW_PROFILE_MS on the upstream (under FORGE_TIMEOUT_MS).
        let slow: Promise<number> | undefined
        if (service === 'forge-aggregator') {
          t.ok(await eventually(async () => (await readyAt(service, ip)) === 503, 20), 'it drains: /ready answers 503')
          await sleep(3_500)
          slow = request(`http://${ip}:${PORT[service]}/api/forge/users?user_name=${SLOW_LOGIN_PREFIX}${randomUUID().slice(0, 8)}`).then(
            async (res) => (await res.body.dump(), res.statusCode),
            () => 0,
          )
        }
        await stopping
        if (slow) t.equal(await slow, 200, `an answer ${SLOW_PROFILE_MS / 1000} s long, begun 3.5 s into the drain, is sent before the replica stops`)
        const { ExitCode } = (await stack.inspect(replica)).State
        exits.push(`${service} ${ExitCode}`)
        t.equal(ExitCode, 0, `${service} replica exits 0`)
        await stack.docker('start', replica)
        // Docker may give it another address; HAProxy finds it through DNS either way.
        const { ip: restartedAt } = await addressOf(replica)
        const back = await backInRotation(service, replica, restartedAt, replicas.length)
        t.ok(back.ok, `the ${service} replica is ready again and HAProxy has it in rotation`, back.ok ? {} : { seen: back.seen })
      }
    }
  })
  const { requests, failures, appended } = await load.stop()
  const wrong = await notStoredOnce(appended)
  const counts = await countsInList()
  t.same(failures, [], `no failed request of ${requests}`)
  t.ok(appended.length > 0, 'appends were answered 201 throughout')
  t.same(wrong, [], 'every name answered 201 is stored exactly once')
  t.comment(
    `rolling restart: ${requests} requests, ${failures.length} failed, ${appended.length} appends, ` +
      `${appended.filter((name) => !counts.has(name)).length} lost, ${appended.filter((name) => (counts.get(name) ?? 0) > 1).length} stored twice; exits: ${exits.join(', ')}`,
  )
})

/**
 * Appends of every kind (plain, with an Idempotency-Key, and the replayed retry of each keyed
 * one), then `restart`, then checks every name is in the list once and every key still replays.
 */
async function survives(t: Test, way: string, restart: (last: () => Promise<void>) => Promise<void>) {
  const label = `${way.replaceAll(' ', '-')}-${randomUUID().slice(0, 6)}`
  const plain = Array.from({ length: 10 }, (_, index) => `${label} plain ${index}`)
  const keyed = Array.from({ length: 10 }, (_, index) => `${label} keyed ${index}`)
  for (const name of plain) t.equal((await append(name)).status, 201)
  for (const name of keyed) {
    t.equal((await append(name, name)).status, 201)
    t.equal((await append(name, name)).headers['idempotent-replayed'], 'true')
  }
  const names = [...plain, ...keyed]
  const before = [...(await countsInList()).entries()].filter(([name]) => name.startsWith(label)).length
  await timed(`durable Redis: ${way}`, () => restart(() => append(`${label} last`).then(({ status }) => void t.equal(status, 201, 'the last append before it'))))
  names.push(`${label} last`)
  t.ok(await eventually(async () => (await call('items-list', '/items/').catch(() => ({ status: 0 }))).status === 200, 200), 'items-list serves again')
  t.same(await notStoredOnce(names), [], 'every name answered 201 is in the list exactly once')
  for (const name of keyed) t.equal((await append(name, name)).headers['idempotent-replayed'], 'true', `${name}: its key is still known`)
  const after = [...(await countsInList()).entries()].filter(([name]) => name.startsWith(label)).length
  t.comment(`${way}: ${before + 1} names in the list before, ${after} after`)
}

t.test('the durable Redis keeps every append through a restart, a SIGKILL right after a 201, and down then up', async (t) => {
  const [redis] = await stack.containers('redis')
  await survives(t, 'restart', async (last) => {
    await last()
    await stack.compose('restart', 'redis')
  })
  await survives(t, 'SIGKILL', async (last) => {
    await last()
    await stack.docker('kill', '--signal', 'KILL', redis!)
    await stack.compose('up', '--detach', '--wait', 'redis')
  })
  await survives(t, 'down and up', async (last) => {
    await last()
    await stack.compose('down', '--timeout', '20')
    await stack.compose('up', '--detach', '--wait')
  })
})

t.test('a full durable Redis refuses appends (503) and evicts nothing: the list and every idempotency record stay', async (t) => {
  const names = Array.from({ length: 20 }, (_, index) => `before-full ${index}`)
  for (const name of names) t.equal((await append(name, name)).status, 201)
  const [redis] = await stack.containers('redis')
  const filler = await createClient({
    socket: { host: (await addressOf(redis!)).ip, port: 6379, reconnectStrategy: false },
    username: 'items-list',
    password: secrets.ITEMS_LIST_REDIS_PASSWORD,
  }).connect()
  t.teardown(() => filler.destroy())
  // Idempotency records, with an expiry as real ones have, until Redis says it is full: a policy
  // that evicts (allkeys-* or volatile-*) would make room by dropping older keys instead.
  const fillers: string[] = []
  /** Writes records of `size` bytes until Redis refuses one; resolves with its refusal. */
  const fill = async (size: number) => {
    const value = 'x'.repeat(size)
    for (let tries = 0; tries < 10_000; tries++) {
      const key = `items:idempotency:filler-${fillers.length}`
      try {
        await filler.set(key, value, { expiration: { type: 'EX', value: 3_600 } })
        fillers.push(key)
      } catch (error) {
        return String(error)
      }
    }
    return 'never full'
  }
  t.match(await fill(2 ** 20), /OOM/, 'Redis refuses writes once full')
  t.match(await fill(2 ** 14), /OOM/)
  t.match(await fill(64), /OOM/)
  // Redis weighs a write against the limit with the writer's own read buffer counted (up to 16 KB),
  // freed once it is refused: the filler's refusal can leave that much room. Appends fill it, a
  // few hundred bytes each, and each one answered 201 must be kept like any other.
  const accepted: string[] = []
  let refused = { status: 0 }
  for (let attempt = 0; attempt < 2_000 && refused.status !== 503; attempt++) {
    const name = `after-full ${attempt}`
    refused = await append(name, name)
    if (refused.status === 201) accepted.push(name)
  }
  t.equal(refused.status, 503, `an append to a full Redis is refused (after ${fillers.length} records and ${accepted.length} appends)`)
  t.same(await notStoredOnce([...names, ...accepted]), [], 'every earlier append is still there, once')
  // A replay rewrites its record, which a full Redis refuses too: room first. PEXPIRE is one of
  // the writes a full Redis still takes, and a timeout of 0 deletes the key at once.
  for (const key of fillers) await filler.pExpire(key, 0)
  for (const name of names) t.equal((await append(name, name)).headers['idempotent-replayed'], 'true', `${name}: its record was not evicted`)
})

t.test('no secret is in an image (layers, settings, history) or in any container’s log; the token did reach the upstream', async (t) => {
  const needles = [...Object.values(secrets), appKeyMarker.split('\n')[1]!]
  for (const service of ['forge-aggregator', 'items-list']) {
    const image = `${stack.project}-${service}`
    const dir = await mkdtemp(join(tmpdir(), 'image-'))
    t.teardown(() => rm(dir, { recursive: true, force: true }))
    await timed(`${service}: image saved and read`, async () => {
      await execFileText('sh', ['-c', `docker save "$0" | tar -x -C "$1"`, image, dir])
      const found: string[] = []
      for (const file of await filesUnder(dir)) {
        const bytes = await readFile(file)
        for (const needle of needles) if (bytes.includes(needle)) found.push(`${file.slice(dir.length)} holds a secret`)
      }
      t.same(found, [], `${image}: no secret in any layer, its configuration or its history`)
    })
  }
  const logs = await stack.compose('logs', '--no-color')
  t.ok(logs.includes('request completed'), 'the logs hold the stack’s access lines')
  t.same(needles.filter((needle) => logs.includes(needle)), [], 'no secret in any container’s log')
  t.ok(fakeGitHub.requests.some(({ authorization }) => authorization === `Bearer ${secrets.FORGE_TOKEN}`), 'the token was used')
})

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name))
}
