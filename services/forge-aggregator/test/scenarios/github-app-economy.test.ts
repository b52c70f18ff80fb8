import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { buildAggregator, testClock, type TestAggregator, type TestEnv } from '../helpers/build.ts'
import { isAppCall, startAppUpstream, type AppUpstream } from '../helpers/app-upstream.ts'
import { pingsAnswered, untilWaitingOnAnotherReplica } from '../helpers/shared-redis.ts'

// The upstream economy of docs/design.md ("Sharing across replicas", "Rate-limit budget") as a
// GitHub App (docs/design.md, "GitHub App"): each replica mints its own installation token, and yet the
// replicas of one installation share one namespace, so the figures are those of a personal token.

// A cache needs no durability: without fsync on every write, a loaded machine does not slow it down.
const redis = await startPrivateRedis({ durable: false })
const redisUrl = `redis://127.0.0.1:${redis.port}`
// Registered before anything can fail: a Redis left running keeps the file alive until tap's
// time limit. A refused connect is retried by the client, not thrown.
t.teardown(() => redis.dispose())
const inspector = createClient({ url: redisUrl })
inspector.on('error', () => {})
t.teardown(() => inspector.destroy())
await inspector.connect()
t.afterEach(async () => {
  await inspector.flushAll()
})

const TTL_MS = 60_000
const REPLICAS = 3
/** The five calls of one `users` answer. */
const USER_CALLS = 5
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`

/**
 * The App as one installation, and as a public App (FORGE_APP_PUBLIC=true) on whose installation
 * every account is (the same one as the default here): its replicas then also ask each account's
 * installation (one lookup per account, shared through Redis) and each mints a token for it, as
 * an account's, beside the default's. Those are the App's calls; the bars count the installation's.
 */
interface AppMode {
  name: string
  env: TestEnv
}
const APP_MODES: readonly AppMode[] = [
  { name: 'one installation', env: {} },
  { name: 'public App, installed account', env: { FORGE_APP_PUBLIC: 'true' } },
]

/** Three replicas of one App installation on the private Redis, one clock, against one fake GitHub. */
async function appReplicas(t: Test, mode: AppMode, env: TestEnv = {}): Promise<{ upstream: AppUpstream; replicas: TestAggregator[] }> {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const replicas: TestAggregator[] = []
  for (let index = 0; index < REPLICAS; index++) replicas.push(await buildAggregator(t, { clock, env: { ...upstream.env, ...mode.env, REDIS_URL: redisUrl, ...env } }))
  return { upstream, replicas }
}

/** Waits until `login`'s answer has reached Redis: replicas write it without waiting. */
async function reachedRedis(login: string): Promise<void> {
  if (!(await eventually(async () => (await inspector.keys(`*answer:users/${login}`)).length === 1))) throw new Error(`${login} never reached Redis`)
}

for (const mode of APP_MODES) {
  t.test(`${mode.name}: 200 concurrent requests for one cold user over 3 App replicas make the five calls of one`, async (t) => {
    const { upstream, replicas } = await appReplicas(t, mode)
    // The installation's calls are answered once another replica is seen waiting on the production.
    upstream.holdAnswers((request) => !isAppCall(request.path), untilWaitingOnAnotherReplica(inspector, await pingsAnswered(inspector)))
    const answers = await Promise.all(Array.from({ length: 200 }, (_, index) => replicas[index % REPLICAS]!.app.inject({ url: usersUrl('mona') })))
    t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]))
    t.equal(new Set(answers.map((res) => res.body)).size, 1, 'every caller got the same answer')
    t.equal(upstream.calls().length, USER_CALLS, 'five REST calls in all')
    t.ok(answers.some((res) => res.headers['cache-status'] === 'forge-aggregator; fwd=miss; collapsed'), 'the other replicas waited on the one production')
    t.ok(upstream.minted.length <= REPLICAS, 'at most one token per replica, apart from the REST calls')
    const lookups = upstream.requests.filter((request) => /^\/users\/[^/]+\/installation$/.test(request.path)).length
    if (mode.env.FORGE_APP_PUBLIC === undefined) t.equal(lookups, 0, 'no lookup')
    else t.ok(lookups >= 1 && lookups <= REPLICAS, `the account's installation looked up at most once per replica (${lookups}), with the App's JWT`)
  })

  t.test(`${mode.name}: a user answered by App replica 1 costs replicas 2 and 3 no call, though each holds a token of its own`, async (t) => {
    const { upstream, replicas } = await appReplicas(t, mode)
    const [one, two, three] = replicas
    // Every replica has minted its token: the answers are shared across different tokens.
    for (const replica of replicas) t.equal((await replica.app.inject({ url: usersUrl(`warm-${replicas.indexOf(replica)}`) })).statusCode, 200)
    t.equal(new Set(upstream.minted).size, REPLICAS)

    const first = await one!.app.inject({ url: usersUrl('mona') })
    await reachedRedis('mona')
    const callsBefore = upstream.calls().length
    for (const replica of [two!, three!]) {
      const res = await replica.app.inject({ url: usersUrl('mona') })
      t.equal(res.statusCode, 200)
      t.equal(res.body, first.body)
      t.equal(res.headers['cache-status'], 'forge-aggregator; hit; ttl=60')
    }
    t.equal(upstream.calls().length, callsBefore, '0 calls')
  })

  t.test(`${mode.name}: the upstream answering 502 past the TTL gives every App replica the stale answer with Age`, async (t) => {
    const { upstream, replicas } = await appReplicas(t, mode)
    const before = await replicas[0]!.app.inject({ url: usersUrl('mona') })
    await reachedRedis('mona')
    replicas[0]!.advanceClock(TTL_MS + 30_000)
    upstream.failWith = 502
    for (const replica of replicas) {
      const res = await replica.app.inject({ url: usersUrl('mona') })
      t.equal(res.statusCode, 200)
      t.equal(res.body, before.body)
      t.equal(res.headers.age, '90')
      t.equal(res.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; fwd-status=502; detail=stale-if-error')
    }
    t.ok(upstream.minted.length >= REPLICAS, 'each replica asked the upstream with a token of its own')
  })

  t.test(`${mode.name}: the installation’s core budget spent on one App replica: the others serve known users stale and new users 403 with Retry-After, without calling`, async (t) => {
    const { upstream, replicas } = await appReplicas(t, mode)
    const [one, two, three] = replicas
    // Known users answered by the replicas that will be stopped: each holds a token of its own.
    for (const [login, replica] of [['known-1', two!], ['known-2', three!]] as const) {
      t.equal((await replica.app.inject({ url: usersUrl(login) })).statusCode, 200)
      await reachedRedis(login)
    }
    one!.advanceClock(TTL_MS + 1)

    // The installation's hour runs out: same window, its reset still ahead, nothing left.
    upstream.rateLimit['x-ratelimit-remaining'] = '0'
    const retryAfterSeconds = Math.ceil((Number(upstream.rateLimit['x-ratelimit-reset']) * 1000 - one!.now()) / 1000)
    t.ok(retryAfterSeconds > 0, 'the reset is ahead')
    t.equal((await one!.app.inject({ url: usersUrl('spender') })).statusCode, 200, 'the last calls of the hour are answered')
    t.ok(await eventually(async () => (await inspector.keys('*budget:*core')).length === 1), 'the spent budget reached Redis')

    const callsBefore = upstream.calls().length
    for (const replica of [two!, three!]) {
      for (const login of ['known-1', 'known-2']) {
        const known = await replica.app.inject({ url: usersUrl(login) })
        t.equal(known.statusCode, 200)
        t.equal(known.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; detail=budget')
        t.ok(known.headers.age !== undefined, 'with Age')
      }
      const unknown = await replica.app.inject({ url: usersUrl(`newcomer-${replicas.indexOf(replica)}`) })
      t.equal(unknown.statusCode, 403)
      t.equal(unknown.headers['retry-after'], String(retryAfterSeconds))
      t.equal(unknown.headers['cache-status'], 'forge-aggregator; detail=budget')
    }
    t.same(upstream.calls().slice(callsBefore), [], 'not one call into the spent budget, not even a search')
  })
}
