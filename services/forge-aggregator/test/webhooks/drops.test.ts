import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { buildAggregator, testClock, type TestAggregator } from '../helpers/build.ts'
import { startAppUpstream, type AppUpstream } from '../helpers/app-upstream.ts'
import { githubDeliveries, payloads, WEBHOOK_SECRET } from '../helpers/webhook-deliveries.ts'

// How a delivery's drops reach Redis and the other replicas: what it writes, in which order, and
// what a replica does when it cannot trust what it heard.
const redis = await startPrivateRedis({ durable: false })
const redisUrl = `redis://127.0.0.1:${redis.port}`
const inspector = createClient({ url: redisUrl })
inspector.on('error', () => {})
await inspector.connect()
t.teardown(async () => {
  await inspector.close()
  await redis.dispose()
})
t.afterEach(() => inspector.flushAll())

const github = githubDeliveries()

/** One replica on the shared Redis, listening for drops, with the App's fake GitHub. */
async function replica(t: Test): Promise<{ aggregator: TestAggregator; upstream: AppUpstream; channel: string }> {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const aggregator = await buildAggregator(t, { clock, env: { ...upstream.env, REDIS_URL: redisUrl, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, FORGE_CACHE_TTL_SECONDS: 86_400 } })
  const listening = await aggregator.logs.waitFor((line) => line.msg === 'listening for webhook drops')
  return { aggregator, upstream, channel: listening.channel as string }
}

async function cacheStatusOf(aggregator: TestAggregator, login: string): Promise<string> {
  return String((await aggregator.app.inject({ url: `/api/forge/users?user_name=${login}` })).headers['cache-status'])
}

/** The shared answer's key for `login`'s users answer, whatever the namespace's version. */
async function sharedAnswerKey(login: string): Promise<string> {
  const [key] = await inspector.keys(`*answer:users/${login}`)
  if (key === undefined) throw new Error(`no shared answer for ${login}`)
  return key
}

const heard = (aggregator: TestAggregator, message: string) => eventually(async () => aggregator.logs.lines.some((line) => line.msg === message), 400, 50)

t.test('an answer a drop writes back stale to Redis keeps the expiry it had', async (t) => {
  const { aggregator } = await replica(t)
  await cacheStatusOf(aggregator, 'mona')
  const key = await sharedAnswerKey('mona')
  // A minute of the service's time passes, none of Redis's: the expiry, as the service counts it, is a minute nearer.
  aggregator.advanceClock(60_000)
  const before = await inspector.pTTL(key)
  t.ok(before > 60_000, `the answer expires in ${before} ms`)

  t.same((await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'))).json(), { outcome: 'applied' })
  const after = await inspector.pTTL(key)
  t.ok(Math.abs(after - (before - 60_000)) < 5_000, `still expires when it would have: ${after} ms, against ${before - 60_000} ms`)
  // Read last: the revalidation it causes stores a new answer, with an expiry of its own.
  t.match(await cacheStatusOf(aggregator, 'mona'), /fwd=stale/, 'it was dropped')
})

t.test('the shared answer is stale in Redis before the drop is announced: Redis runs the write, then the announcement', async (t) => {
  const { aggregator } = await replica(t)
  await cacheStatusOf(aggregator, 'mona')
  const key = await sharedAnswerKey('mona')
  // MONITOR lists the commands in the order Redis ran them.
  const monitor = inspector.duplicate()
  monitor.on('error', () => {})
  await monitor.connect()
  t.teardown(() => monitor.destroy())
  const ran: string[] = []
  await monitor.monitor((line) => ran.push(line))

  t.same((await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'))).json(), { outcome: 'applied' })
  t.ok(await eventually(async () => ran.some((line) => line.includes('"EVAL"'))), 'the announcement ran')
  const written = ran.findIndex((line) => line.includes('"SET"') && line.includes(`"${key}"`))
  const announced = ran.findIndex((line) => line.includes('"EVAL"') && line.includes('publish'))
  t.not(written, -1, 'the stale answer was written')
  t.ok(written < announced, `written (command ${written}) before announced (command ${announced})`)
})

// As a delivery does (replicas.test.ts, "a drop during a production"): what a production under
// way read may predate the drops this replica may have missed.
for (const [what, missDrops] of [
  ['an unreadable drop message', (channel: string) => inspector.publish(channel, 'not a drop message')],
  ['a reconnection of the drops subscriber', () => inspector.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub'])],
] as const) {
  t.test(`${what} during a production: the answer it stores is already stale`, async (t) => {
    const { aggregator, upstream, channel } = await replica(t)
    let release!: () => void
    upstream.holdAnswers((request) => request.path.startsWith('/users/mona/repos'), new Promise<void>((resolve) => (release = resolve)))
    const producing = cacheStatusOf(aggregator, 'mona')
    await upstream.untilRequested((request) => request.path.startsWith('/users/mona/repos'))
    await missDrops(channel)
    t.ok(await heard(aggregator, /unreadable/.test(what) ? 'unreadable webhook drop message: every answer in memory revalidates' : 'webhook drops may have been missed while reconnecting: every answer in memory revalidates'), 'it may have missed drops')
    release()
    await producing
    t.match(await cacheStatusOf(aggregator, 'mona'), /fwd=stale; stored/, 'what it read may predate a drop: revalidated')
  })
}
