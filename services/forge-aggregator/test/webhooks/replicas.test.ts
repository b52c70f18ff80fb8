import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { buildApp } from '../../src/app.ts'
import { ForgeAggregatorConfig } from '../../src/config.ts'
import { eventually, startPrivateRedis, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS } from '@repo/test-support'
import { buildAggregator, testClock, type TestAggregator, type TestClock, type TestEnv } from '../helpers/build.ts'
import { startAppUpstream, type AppUpstream } from '../helpers/app-upstream.ts'
import { githubDeliveries, payloads, WEBHOOK_SECRET } from '../helpers/webhook-deliveries.ts'

// The replicas log in as the aggregator's own ACL user: what a delivery sends to Redis, its
// scripts included, is what compose and Kubernetes allow.
const redis = await startRedisWithServiceUsers({ durable: false })
const redisUrl = `redis://127.0.0.1:${redis.port}`
const inspector = createClient({ url: redisUrl, ...TEST_REDIS_ADMIN })
inspector.on('error', () => {})
await inspector.connect()
t.teardown(async () => {
  await inspector.close()
  await redis.dispose()
})
t.afterEach(() => inspector.flushAll())

const github = githubDeliveries()

/** Waits, with room for a busy machine, for what another replica or Redis does in its own time. */
async function until(t: Test, condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  t.ok(await eventually(async () => condition(), 400, 50), what)
}

const heard = (replica: TestAggregator, message: string) => () => replica.logs.lines.some((line) => line.msg === message)

/** `count` replicas of one App deployment on the shared Redis, each listening for drops. */
async function replicas(t: Test, count: number, options: { url?: string } = {}) {
  const clock: TestClock = testClock()
  const upstream = await startAppUpstream(t, clock)
  // A Redis of the test's own has no ACL users.
  const login = options.url ? {} : { REDIS_USERNAME: TEST_REDIS_USERS.forgeAggregator.username, REDIS_PASSWORD: TEST_REDIS_USERS.forgeAggregator.password }
  const env: TestEnv = {
    ...upstream.env,
    REDIS_URL: options.url ?? redisUrl,
    ...login,
    FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    FORGE_CACHE_TTL_SECONDS: 86_400,
  }
  const built = await Promise.all(Array.from({ length: count }, () => buildAggregator(t, { clock, env })))
  for (const replica of built) await until(t, heard(replica, 'listening for webhook drops'), 'the replica listens for drops')
  return { replicas: built, upstream }
}

async function users(replica: TestAggregator, login: string) {
  const response = await replica.app.inject({ url: `/api/forge/users?user_name=${login}` })
  return { cacheStatus: String(response.headers['cache-status']), totalStars: response.json<{ stats: { totalStars: number } }>().stats.totalStars }
}

/** The calls after the `from`th that could be conditional: not the App's own, not the searches (they carry no ETag). */
const conditionalCalls = (upstream: AppUpstream, from: number) =>
  upstream.requests.slice(from).filter((request) => !request.path.startsWith('/search/') && !request.path.startsWith('/app/'))

t.test('a star delivered to one replica makes every replica revalidate, and each shows the new count', async (t) => {
  const { replicas: [one, two, three], upstream } = await replicas(t, 3)
  const first = await users(one!, 'mona')
  t.match((await users(two!, 'mona')).cacheStatus, /; hit;/, 'two holds the answer in its memory')
  upstream.stars.mona = 1000
  t.equal((await users(two!, 'mona')).totalStars, first.totalStars, 'and would go on sending it for its TTL')
  // The shared clock moves on: the answers produced from here on are the newer ones.
  one!.advanceClock(1000)

  const delivered = await github.deliver(one!.app, 'star', payloads.star('mona', 'repo-000'))
  t.same(delivered.json(), { outcome: 'applied' })
  await until(t, heard(two!, 'webhook drops heard from another replica'), 'two heard of the drop')

  // Three never held the answer: it reads Redis, where the drop made it stale.
  let seen = upstream.requests.length
  const fromRedis = await users(three!, 'mona')
  t.match(fromRedis.cacheStatus, /fwd=stale; stored/, 'three revalidates')
  t.equal(fromRedis.totalStars, 2000)
  t.ok(conditionalCalls(upstream, seen).length === 3 && conditionalCalls(upstream, seen).every((request) => request.ifNoneMatch), 'with conditional calls')

  // Two's memory was made stale by the message: it goes to Redis, and finds three's new answer.
  seen = upstream.requests.length
  t.same(await users(two!, 'mona'), { cacheStatus: 'forge-aggregator; hit; ttl=86400', totalStars: 2000 })
  t.equal((await users(one!, 'mona')).totalStars, 2000)
  t.equal(upstream.requests.length, seen, 'one revalidation served every replica')
})

t.test('each replica that held the answer revalidates it itself when nobody did before', async (t) => {
  const { replicas: [one, two], upstream } = await replicas(t, 2)
  await users(one!, 'mona')
  await users(two!, 'mona')
  upstream.stars.mona = 1000
  await github.deliver(one!.app, 'star', payloads.star('mona', 'repo-000'))
  await until(t, heard(two!, 'webhook drops heard from another replica'), 'two heard of the drop')
  const seen = upstream.requests.length
  const after = await users(two!, 'mona')
  t.match(after.cacheStatus, /fwd=stale; stored/)
  t.equal(after.totalStars, 2000)
  t.ok(conditionalCalls(upstream, seen).every((request) => request.ifNoneMatch), 'conditional calls')
})

t.test('a repeated delivery changes nothing on any replica: by id or by body, within 3 days', async (t) => {
  const { replicas: [one, two], upstream } = await replicas(t, 2)
  await users(one!, 'mona')
  const first = await github.deliver(one!.app, 'star', payloads.star('mona', 'repo-000'))
  await users(one!, 'mona')
  upstream.stars.mona = 5
  t.same((await github.redeliver(two!.app, first.id)).json(), { outcome: 'repeat' }, 'redelivered to another replica')
  t.same((await github.deliver(two!.app, 'star', payloads.star('mona', 'repo-000'))).json(), { outcome: 'repeat' }, 'the same body under a new id')
  for (const replica of [one!, two!]) t.match((await users(replica, 'mona')).cacheStatus, /; hit;/)
  const ttl = await inspector.ttl((await inspector.keys(`forge:*webhook-delivery:${first.id}`))[0]!)
  t.ok(ttl > 259_000 && ttl <= 259_200, `remembered for 3 days (${ttl} s)`)
  // A later star, a new body: applied, though the answer is already stale in Redis.
  t.same((await github.deliver(two!.app, 'star', payloads.star('mona', 'repo-000', 'deleted'))).json(), { outcome: 'applied' })
  t.same((await github.deliver(two!.app, 'star', payloads.star('mona', 'repo-000', 'created'), { id: 'fa11ed00-0000-0000-0000-000000000000' })).json(), { outcome: 'repeat' }, 'the first body again')
})

t.test('a drop during a production: the answer it stores is already stale', async (t) => {
  const { replicas: [one, two], upstream } = await replicas(t, 2)
  let release!: () => void
  upstream.holdAnswers((request) => request.path.startsWith('/users/mona/repos'), new Promise<void>((resolve) => (release = resolve)))
  const producing = users(one!, 'mona')
  await upstream.untilRequested((request) => request.path.startsWith('/users/mona/repos'))
  t.same((await github.deliver(two!.app, 'star', payloads.star('mona', 'repo-000'))).json(), { outcome: 'applied' })
  await until(t, heard(one!, 'webhook drops heard from another replica'), 'one heard of the drop')
  release()
  await producing
  t.match((await users(one!, 'mona')).cacheStatus, /fwd=stale; stored/, 'what it read may predate the star: revalidated')
})

t.test('installation deleted on one replica: every replica fetches a new installation token', async (t) => {
  const { replicas: [one, two], upstream } = await replicas(t, 2)
  await users(one!, 'mona')
  await users(two!, 'hubot')
  t.equal(upstream.minted.length, 2, 'one token each')
  await github.deliver(one!.app, 'installation', payloads.installation('deleted', 9001))
  await until(t, heard(two!, 'webhook drops heard from another replica'), 'two heard of it')
  await users(two!, 'octocat')
  t.equal(upstream.minted.length, 3, 'two minted a new one')
})

t.test('a replica that may have missed drops makes every answer in its memory stale', async (t) => {
  const { replicas: [one] } = await replicas(t, 1)
  const channel = one!.logs.lines.find((line) => line.msg === 'listening for webhook drops')!.channel as string
  const forgetShared = async () => {
    for (const key of await inspector.keys(`${channel.replace(/drops$/, '')}answer:*`)) await inspector.del(key)
  }

  await users(one!, 'mona')
  await forgetShared()
  await inspector.publish(channel, 'not a drop message')
  await until(t, heard(one!, 'unreadable webhook drop message: every answer in memory revalidates'), 'an unreadable message')
  t.match((await users(one!, 'mona')).cacheStatus, /fwd=stale; stored/, 'revalidated from its memory')

  await forgetShared()
  await inspector.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub'])
  await until(t, heard(one!, 'webhook drops may have been missed while reconnecting: every answer in memory revalidates'), 'its subscriber reconnected')
  t.match((await users(one!, 'mona')).cacheStatus, /fwd=stale; stored/, 'revalidated from its memory')
})

t.test('Redis unavailable: 503, nothing remembered, and the redelivery applies once Redis is back', async (t) => {
  const own = await startPrivateRedis({ durable: false })
  t.teardown(() => own.dispose())
  const { replicas: [one] } = await replicas(t, 1, { url: `redis://127.0.0.1:${own.port}` })
  await users(one!, 'mona')
  await own.stop()
  const failed = await github.deliver(one!.app, 'star', payloads.star('mona', 'repo-000'))
  t.equal(failed.statusCode, 503)
  t.same(failed.json(), { error: 'Webhook delivery could not be applied; redeliver it' })
  t.equal(await one!.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'failed' }), 1)
  await own.start()
  await until(t, async () => (await github.redeliver(one!.app, failed.id)).statusCode === 200, 'the redelivery is applied')
  t.same((await github.redeliver(one!.app, failed.id)).json(), { outcome: 'repeat' })
})

t.test('a replica whose Redis user may not use the channels says it does not hear drops, and answers deliveries 503', async (t) => {
  const user = { username: 'no-channels', password: 'no-channels-password' }
  await inspector.sendCommand(['ACL', 'SETUSER', user.username, 'on', `>${user.password}`, 'resetkeys', '~forge:*', 'resetchannels', '-@all', '+ping', '+get', '+set', '+del', '+eval', '+exists', '+publish', '+subscribe'])
  t.teardown(() => inspector.sendCommand(['ACL', 'DELUSER', user.username]))
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const env = { ...upstream.env, REDIS_URL: redisUrl, REDIS_USERNAME: user.username, REDIS_PASSWORD: user.password, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET }
  const lines: string[] = []
  // Built without the test helper, which waits for a subscriber this user cannot have.
  const app = await buildApp(loadConfig(ForgeAggregatorConfig, env as Record<string, string>), { logger: createLogger('info', { write: (line: string) => void lines.push(line) }), clock })
  t.teardown(() => app.close())
  await until(t, () => lines.some((line) => line.includes('not listening for webhook drops')), 'it says so')
  const delivered = await github.deliver(app, 'star', payloads.star('mona', 'repo-000'))
  t.equal(delivered.statusCode, 503, 'the other replicas could not be told')
})
