import t from 'tap'
import { createHmac, randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { eventually, findFreePort, startPrivateRedis } from '@repo/test-support'
import { COMPOSE_CONFIG_PATH, checkConfig, haproxyCommand, localConfig, startHaproxy, whyNoHaproxy } from '../src/haproxy.ts'
import { startFakeUpstream, startReplica, stop } from '../src/replicas.ts'

const compose = readFileSync(COMPOSE_CONFIG_PATH, 'utf8')
const noHaproxy = whyNoHaproxy()
const WEBHOOK_SECRET = 'haproxy-test-webhook-secret'

t.test('without haproxy the tests skip with the reason, except in CI, where they fail', async (t) => {
  const ci = process.env.CI
  t.teardown(() => {
    if (ci === undefined) delete process.env.CI
    else process.env.CI = ci
  })
  delete process.env.CI
  t.match(whyNoHaproxy('haproxy-that-is-not-there'), /no HAProxy here: no haproxy-that-is-not-there on PATH or in \/usr\/sbin \(apt-get install haproxy\)/)
  process.env.CI = 'true'
  t.throws(() => whyNoHaproxy('haproxy-that-is-not-there'), /in \/usr\/sbin .*, and CI requires it/)
})

t.test('a haproxy that is there but fails its -v is an error, not a reason to skip', async (t) => {
  t.throws(() => whyNoHaproxy('false'), /^false -v did not succeed: exit status 1; it printed: \(nothing\)$/)
})

t.test('a check that does not finish within its deadline is an error saying so, with the signal and what it printed, not a status of null', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'haproxy-stuck-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const stuck = join(dir, 'haproxy')
  writeFileSync(stuck, '#!/bin/sh\necho "[NOTICE] checking $3" >&2\nexec sleep 60\n', { mode: 0o755 })
  t.throws(() => checkConfig(compose, { command: stuck, timeoutMs: 500 }), new RegExp(`^${stuck} -c did not finish: still running after 500 ms, killed by SIGKILL; it printed: \\[NOTICE\\] checking /`))
})

t.test('a check whose haproxy cannot be started is an error saying why, not a status of null', async (t) => {
  t.throws(() => checkConfig(compose, { command: 'haproxy-that-is-not-there' }), /^haproxy-that-is-not-there -c did not finish: spawnSync haproxy-that-is-not-there ENOENT; it printed: \(nothing\)$/)
})

const topology = { frontends: { 'forge-aggregator': 3000, 'items-list': 8080 }, replicas: { 'forge-aggregator': [3001, 3002, 3003], 'items-list': [8081, 8082] } }

t.test('the compose configuration finds replicas through Docker DNS, checks /ready every 0.5 s, and publishes :3000 and :8080', async (t) => {
  t.match(compose, /^resolvers docker\n {4}nameserver dns 127\.0\.0\.11:53$/m)
  t.match(compose, /^ {4}default-server inter 500ms fall 2 rise 2 resolvers docker init-addr none$/m)
  t.match(compose, /^frontend forge-aggregator\n {4}bind :3000\n/m)
  t.match(compose, /^frontend items-list\n {4}bind :8080\n/m)
  for (const [service, port] of [['forge-aggregator', 3000], ['items-list', 8080]] as const) {
    t.match(compose, new RegExp(`^backend ${service}\\n(?: {4}.*\\n)* {4}http-check send meth GET uri /ready\\n {4}http-check expect status 200\\n`, 'm'), `${service}: checked on /ready`)
    t.match(compose, new RegExp(`^ {4}server-template ${service}- \\d+ ${service}:${port} check$`, 'm'), `${service}: every replica Docker's DNS names`)
  }
})

t.test('the local configurations are the compose one with local addresses, and no retries or TCP mode when asked', async (t) => {
  const http = localConfig({ ...topology, mode: 'http', retries: true })
  t.notMatch(http, /resolvers|127\.0\.0\.11|server-template/)
  t.match(http, /^frontend items-list\n {4}bind 127\.0\.0\.1:8080$/m)
  t.match(http, /^ {4}server items-list-1 127\.0\.0\.1:8081 check\n {4}server items-list-2 127\.0\.0\.1:8082 check$/m)
  t.match(http, /^ {4}server forge-aggregator-3 127\.0\.0\.1:3003 check$/m)
  t.match(http, /^ {4}retries 2$/m)
  t.match(http, /^ {4}option redispatch 1$/m)
  const bare = localConfig({ ...topology, mode: 'http', retries: false })
  t.match(bare, /^ {4}retries 0$/m)
  t.notMatch(bare, /redispatch/)
  const tcp = localConfig({ ...topology, mode: 'tcp', retries: false })
  t.match(tcp, /^ {4}mode tcp$/m)
  t.match(tcp, /^ {4}option tcplog$/m)
  t.notMatch(tcp, /forwardfor|http-request|httplog/)
  t.match(tcp, /^ {4}option httpchk$/m, 'still checked on /ready')
  t.notMatch(tcp, /stats socket/)
  t.match(localConfig({ ...topology, mode: 'http', retries: true, adminSocket: '/run/h.sock' }), /^global\n {4}stats socket \/run\/h\.sock level admin\n/m)
})

t.test('a compose configuration without what the local one rewrites is refused, not silently kept', async (t) => {
  t.throws(() => localConfig({ ...topology, mode: 'http', retries: true }, compose.replace('frontend forge-aggregator', 'frontend aggregator')), /has no \/\^\(frontend forge-aggregator/)
  t.throws(() => localConfig({ ...topology, mode: 'http', retries: false }, compose.replace('    retries 2\n', '')), /has no/)
})

t.test('haproxy -c accepts the compose configuration and every local one, without a warning', { skip: noHaproxy }, async (t) => {
  for (const [label, text] of [
    ['compose', compose],
    ['local, HTTP', localConfig({ ...topology, mode: 'http', retries: true })],
    ['local, HTTP, no retries', localConfig({ ...topology, mode: 'http', retries: false })],
    ['local, TCP, no retries', localConfig({ ...topology, mode: 'tcp', retries: false })],
    ['local, with a runtime API socket', localConfig({ ...topology, mode: 'http', retries: false, adminSocket: '/tmp/haproxy-check.sock' })],
  ] as const) {
    const { status, output } = checkConfig(text)
    t.equal(status, 0, `${label}: valid`)
    t.notMatch(output, /WARNING|ALERT/, `${label}: no warning`)
  }
  t.not(checkConfig(compose.replace('option httpchk', 'option httpcheck')).status, 0, 'a broken file is not')
})

t.test('the compose configuration serves both services from local replicas, once their /ready answers', { skip: noHaproxy }, async (t) => {
  const redis = await startPrivateRedis({ durable: false })
  t.teardown(() => redis.dispose())
  const upstream = await startFakeUpstream()
  t.teardown(() => stop(upstream.process, 'SIGKILL'))
  const [aggregator, items] = await Promise.all([
    startReplica('forge-aggregator', { FORGE_API_URL: upstream.url, SHUTDOWN_DELAY_SECONDS: '0', FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET }),
    startReplica('items-list', { REDIS_URL: `redis://127.0.0.1:${redis.port}`, SHUTDOWN_DELAY_SECONDS: '0' }),
  ])
  t.teardown(() => Promise.all([stop(aggregator.process, 'SIGKILL'), stop(items.process, 'SIGKILL')]))
  const frontends = { 'forge-aggregator': await findFreePort(), 'items-list': await findFreePort() }
  const socketDir = mkdtempSync(join(tmpdir(), 'haproxy-admin-'))
  const adminSocket = join(socketDir, 'admin.sock')
  const haproxy = startHaproxy(
    localConfig({ frontends, replicas: { 'forge-aggregator': [aggregator.port], 'items-list': [items.port] }, mode: 'http', retries: true, adminSocket }),
  )
  t.teardown(async () => {
    await stop(haproxy, 'SIGKILL')
    rmSync(socketDir, { recursive: true, force: true })
  })
  const agent = new Agent()
  t.teardown(() => agent.close())
  const get = async (url: string) => {
    const response = await request(url, { dispatcher: agent }).catch(() => undefined)
    return { status: response?.statusCode, body: await response?.body.text() }
  }
  const aggregatorUrl = `http://127.0.0.1:${frontends['forge-aggregator']}`
  const itemsUrl = `http://127.0.0.1:${frontends['items-list']}`
  t.ok(await eventually(async () => (await get(`${itemsUrl}/items/`)).status === 200, 200), 'items-list is served')
  t.ok(await eventually(async () => (await get(`${aggregatorUrl}/ready`)).status === 200, 200), 'forge-aggregator is served')

  const added = await request(`${itemsUrl}/items/`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body: '{"name":"through haproxy"}' })
  t.equal(added.statusCode, 201)
  await added.body.dump()
  t.same(JSON.parse((await get(`${itemsUrl}/items/`)).body ?? ''), { items: ['through haproxy'] })
  const user = await get(`${aggregatorUrl}/api/forge/users?user_name=mona`)
  t.equal(user.status, 200)
  t.match(JSON.parse(user.body ?? ''), { user: { login: 'mona' } })
  // GitHub's webhook deliveries reach the aggregator too: a POST, signed over the body as sent.
  const delivery = '{"zen":"through haproxy"}'
  const webhook = await request(`${aggregatorUrl}/api/forge/webhooks`, {
    method: 'POST',
    dispatcher: agent,
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'ping',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(delivery).digest('hex')}`,
    },
    body: delivery,
  })
  t.equal(webhook.statusCode, 200, 'a signed webhook delivery is answered')
  t.same(await webhook.body.json(), { outcome: 'ignored' })
  t.match(haproxy.output(), /items-list items-list\/items-list-1 .* 201 .*"POST \/items\/ HTTP\/1\.1"/, 'HAProxy logs each request')

  // What an orchestrator's controller does before it stops a replica: take it out by hand.
  t.equal(await haproxyCommand(adminSocket, 'set server items-list/items-list-1 state maint'), '\n')
  t.equal((await get(`${itemsUrl}/items/`)).status, 503, 'no replica left in rotation')
  await haproxyCommand(adminSocket, 'set server items-list/items-list-1 state ready')
  t.ok(await eventually(async () => (await get(`${itemsUrl}/items/`)).status === 200, 200), 'back in rotation')
  t.equal(await stop(aggregator.process), 0)
  t.equal(await stop(items.process), 0)
})
