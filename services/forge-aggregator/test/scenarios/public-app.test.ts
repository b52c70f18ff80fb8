import t, { type Test } from 'tap'
import { eventually } from '@repo/test-support'
import { buildAggregator, testClock, type TestAggregator, type TestClock, type TestEnv } from '../helpers/build.ts'
import { installationOn, startAppUpstream, type AppUpstream } from '../helpers/app-upstream.ts'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { githubDeliveries, WEBHOOK_SECRET } from '../helpers/webhook-deliveries.ts'

// A public GitHub App (FORGE_APP_PUBLIC=true, docs/github-app.md, "A public App"): three accounts
// installed it, one did not; the default installation serves that one and `repos`.
const DEFAULT_INSTALLATION = '100'
const INSTALLED = { alice: '101', bob: '102', carol: '103' } as const
const ACCOUNTS = ['alice', 'bob', 'carol', 'dave'] as const
const MINUTE_MS = 60_000
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`
const redis = await sharedRedis(t)

function installAll(upstream: AppUpstream): void {
  upstream.installations.set(DEFAULT_INSTALLATION, installationOn('forge-operator'))
  for (const [login, id] of Object.entries(INSTALLED)) upstream.installations.set(id, installationOn(login))
}

async function publicApp(t: Test, env: TestEnv = {}, clock: TestClock = testClock()) {
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const aggregator = await buildAggregator(t, { clock, env: { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, ...env } })
  return { upstream, ...aggregator }
}

/** The credentials the calls about `login` went with. */
const credentialsOf = (upstream: AppUpstream, login: string) =>
  new Set(upstream.charged.filter((call) => call.path.includes(`/users/${login}`) || call.path.includes(`author%3A${login}+`)).map((call) => call.credential))

const installationPayload = (action: string, id: string, login: string) => ({ action, installation: { id: Number(id), account: { login } }, sender: { login } })

t.test('each installed account is charged to its own installation only, the uninstalled one to the default', async (t) => {
  const { app, upstream, metric } = await publicApp(t)
  for (const login of ACCOUNTS) t.equal((await app.inject({ url: usersUrl(login) })).statusCode, 200, login)

  for (const [login, id] of Object.entries(INSTALLED)) t.same(credentialsOf(upstream, login), new Set([`installation ${id}`]), login)
  t.same(credentialsOf(upstream, 'dave'), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  for (const [login, id] of Object.entries(INSTALLED)) {
    t.equal(upstream.installations.get(id)!.core, 5000 - 3, `${login}: profile, repos, followers`)
    t.equal(upstream.installations.get(id)!.search, 30 - 2, `${login}: the two searches`)
  }
  t.equal(upstream.installations.get(DEFAULT_INSTALLATION)!.core, 5000 - 3, "the default paid for dave's calls alone")
  t.same(upstream.lookups, [...ACCOUNTS], 'one lookup per account')
  t.equal(await metric('forge_app_installation_tokens_held'), 4)
  t.equal(await metric('forge_upstream_credential_calls_total', { credential: 'app-account', outcome: 'sent' }), 15)
  t.equal(await metric('forge_upstream_credential_calls_total', { credential: 'app-default', outcome: 'sent' }), 5)
  t.equal(await metric('forge_app_installation_lookups_total', { outcome: 'installed' }), 3)
  t.equal(await metric('forge_app_installation_lookups_total', { outcome: 'not_installed' }), 1)
  t.comment(`Upstream calls per credential, one users answer for each of ${ACCOUNTS.join(', ')}:\n${upstream.table()}`)

  // The searches count public issues only: an installation's token may reach its account's private repositories.
  t.ok(upstream.charged.filter((call) => call.path.startsWith('/search/')).every((call) => call.path.includes('is%3Apublic')))
  // repos goes with the default, whoever the owner.
  const callsBefore = upstream.charged.length
  t.equal((await app.inject({ url: '/api/forge/repos?user_name=alice' })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(callsBefore).map((call) => call.credential)), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  // The operator's own account, installed as the default: one credential, the default's.
  t.equal((await app.inject({ url: usersUrl('forge-operator') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'forge-operator'), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  t.equal(await metric('forge_upstream_credential_calls_total', { credential: 'app-default', outcome: 'sent' }), 5 + 1 + 5)
})

t.test('without a default installation, an account that did not install the App is called anonymously', async (t) => {
  const { app, upstream, metric } = await publicApp(t, { FORGE_APP_INSTALLATION_ID: '' })
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'dave'), new Set(['anonymous']))
  t.same(credentialsOf(upstream, 'alice'), new Set([`installation ${INSTALLED.alice}`]))
  t.equal(await metric('forge_upstream_credential_calls_total', { credential: 'anonymous', outcome: 'sent' }), 5)
})

t.test("one installation exhausted makes only its account's answers stale; the others stay fresh", async (t) => {
  const { app, upstream, advanceClock, metric } = await publicApp(t)
  for (const login of ACCOUNTS) t.equal((await app.inject({ url: usersUrl(login) })).statusCode, 200)
  // bob's installation is spent: its 403s tell the budget.
  upstream.installations.get(INSTALLED.bob)!.core = 0
  advanceClock(2 * MINUTE_MS)

  const bob = await app.inject({ url: usersUrl('bob') })
  t.equal(bob.statusCode, 200)
  t.match(bob.headers['cache-status'], /fwd=stale/, 'bob: his last answer, stale')
  const callsBefore = upstream.charged.length
  const again = await app.inject({ url: usersUrl('bob') })
  t.match(again.headers['cache-status'], /hit; fwd=stale; detail=budget/, 'bob again: stale from the budget, no call made')
  t.equal(upstream.charged.length, callsBefore)
  t.ok((await metric('forge_upstream_credential_calls_total', { credential: 'app-account', outcome: 'budget_spent' }))! > 0)

  for (const login of ['alice', 'carol', 'dave']) {
    const fresh = await app.inject({ url: usersUrl(login) })
    t.equal(fresh.statusCode, 200, login)
    t.notMatch(fresh.headers['cache-status'], /; hit/, `${login}: asked again, fresh`)
  }
  t.ok(upstream.charged.filter((call) => call.status === 403).length <= 3, 'the spent installation was called past its limit by one answer only')
})

t.test('installation.created makes the next request use the new installation without a lookup; installation.deleted stops its use at once', async (t) => {
  const { app, upstream, advanceClock, metric } = await publicApp(t)
  const github = githubDeliveries()
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'dave'), new Set([`installation ${DEFAULT_INSTALLATION}`]))

  upstream.installations.set('104', installationOn('dave'))
  t.equal((await github.deliver(app, 'installation', installationPayload('created', '104', 'dave'))).json().outcome, 'applied')
  advanceClock(2 * MINUTE_MS)
  const callsBefore = upstream.charged.length
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(callsBefore).map((call) => call.credential)), new Set(['installation 104']))
  t.same(upstream.lookups, ['dave'], 'only the first request looked dave up')

  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  const held = await metric('forge_app_installation_tokens_held')
  upstream.installations.delete(INSTALLED.alice)
  t.equal((await github.deliver(app, 'installation', installationPayload('deleted', INSTALLED.alice, 'alice'))).json().outcome, 'applied')
  t.equal(await metric('forge_app_installation_tokens_held'), held! - 1, "alice's token is forgotten")
  advanceClock(2 * MINUTE_MS)
  const before = upstream.charged.length
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set([`installation ${DEFAULT_INSTALLATION}`]), 'alice now goes with the default')
  t.same(upstream.lookups, ['dave', 'alice'], 'no lookup after the delivery')

  // suspend and unsuspend: the same, both ways.
  t.equal((await github.deliver(app, 'installation', installationPayload('suspend', INSTALLED.bob, 'bob'))).json().outcome, 'applied')
  t.equal((await app.inject({ url: usersUrl('bob') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'bob'), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  t.equal((await github.deliver(app, 'installation', installationPayload('unsuspend', INSTALLED.bob, 'bob'))).json().outcome, 'applied')
  advanceClock(2 * MINUTE_MS)
  const beforeBob = upstream.charged.length
  t.equal((await app.inject({ url: usersUrl('bob') })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(beforeBob).map((call) => call.credential)), new Set([`installation ${INSTALLED.bob}`]))
})

t.test('installation_target renamed: the new login goes with the installation without a lookup', async (t) => {
  const { app, upstream } = await publicApp(t)
  const github = githubDeliveries()
  upstream.installations.get(INSTALLED.carol)!.login = 'caroline'
  const renamed = { action: 'renamed', installation: { id: Number(INSTALLED.carol) }, account: { login: 'caroline' }, changes: { login: { from: 'carol' } }, target_type: 'User' }
  t.equal((await github.deliver(app, 'installation_target', renamed)).json().outcome, 'applied')
  t.equal((await app.inject({ url: usersUrl('caroline') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'caroline'), new Set([`installation ${INSTALLED.carol}`]))
  t.same(upstream.lookups, [])
})

t.test('uninstalled or suspended without a webhook: GitHub refuses the mint, and the account goes with the default from that call on', async (t) => {
  const { app, upstream, advanceClock } = await publicApp(t)
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.equal((await app.inject({ url: usersUrl('bob') })).statusCode, 200)
  upstream.installations.delete(INSTALLED.alice)
  upstream.installations.get(INSTALLED.bob)!.suspended = true
  // An hour on, the held tokens have expired: the next calls need new ones.
  advanceClock(61 * MINUTE_MS)
  for (const login of ['alice', 'bob']) {
    const before = upstream.charged.length
    t.equal((await app.inject({ url: usersUrl(login) })).statusCode, 200, login)
    t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set([`installation ${DEFAULT_INSTALLATION}`]), `${login}: the default`)
  }
  advanceClock(2 * MINUTE_MS)
  const mints = upstream.minted.length
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.equal(upstream.minted.length, mints, 'no mint is tried again for an installation known gone')
  t.same(upstream.lookups, ['alice', 'bob'], 'nor a lookup')
})

t.test('a cached answer costs no upstream call, no lookup and no mint', async (t) => {
  const { app, upstream } = await publicApp(t)
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  const calls = upstream.charged.length
  const cached = await app.inject({ url: usersUrl('alice') })
  t.match(cached.headers['cache-status'], /; hit/)
  t.equal(upstream.charged.length, calls)
  t.same(upstream.lookups, ['alice'])
  t.equal(upstream.minted.length, 1)
})

t.test('a lookup that fails is not remembered: the calls go with the default, and the next request asks again', async (t) => {
  const { app, upstream, advanceClock, metric } = await publicApp(t)
  upstream.lookupStatus = 500
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'alice'), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  t.equal(await metric('forge_app_installation_lookups_total', { outcome: 'failed' }), 1)
  upstream.lookupStatus = undefined
  advanceClock(2 * MINUTE_MS)
  const before = upstream.charged.length
  t.equal((await app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set([`installation ${INSTALLED.alice}`]))
  t.same(upstream.lookups, ['alice', 'alice'])
})

/** Every key and value in Redis, as one text. */
async function everythingInRedis(): Promise<string> {
  const keys = await redis.inspector.keys('*')
  const values = await Promise.all(keys.map(async (key) => ((await redis.inspector.type(key)) === 'string' ? ((await redis.inspector.get(key)) ?? '') : '')))
  return [...keys, ...values].join('\n')
}

t.test('three replicas over an hour mint at most three tokens per installation; no token reaches Redis, a log line or an answer', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const env = { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, FORGE_CACHE_TTL_SECONDS: 0 }
  const replicas: TestAggregator[] = await redis.replicas(t, 3, { clock, env })
  const answers: string[] = []
  for (let minute = 0; minute < 60; minute += 10) {
    const all = await Promise.all(replicas.flatMap(({ app }) => ACCOUNTS.map((login) => app.inject({ url: usersUrl(login) }))))
    for (const answer of all) answers.push(JSON.stringify(answer.headers) + answer.body)
    t.ok(all.every((answer) => answer.statusCode === 200), `minute ${minute}: every answer 200`)
    clock.advance(10 * MINUTE_MS)
  }
  for (const id of [DEFAULT_INSTALLATION, ...Object.values(INSTALLED)]) t.ok(upstream.tokensOf(id).length <= 3, `installation ${id}: ${upstream.tokensOf(id).length} tokens minted`)
  for (const [login, id] of Object.entries(INSTALLED)) t.same(credentialsOf(upstream, login), new Set([`installation ${id}`]), login)
  t.ok(upstream.lookups.length <= ACCOUNTS.length * 3, 'lookups are shared through Redis')

  const stored = await everythingInRedis()
  t.match(stored, /budget:installation:102:core/, "bob's installation has its own budget in Redis")
  t.match(stored, /installation:alice/, "alice's installation is remembered in Redis")
  const logs = replicas.map(({ logs }) => logs.text()).join('\n')
  for (const secret of upstream.secrets()) {
    t.notOk(stored.includes(secret), 'no token or JWT in Redis')
    t.notOk(logs.includes(secret), 'no token or JWT in the logs')
    t.notOk(answers.some((answer) => answer.includes(secret)), 'no token or JWT in an answer')
  }
})

t.test('installation.deleted on one replica stops the use on every replica at once, and every replica forgets the token', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const env = { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, FORGE_CACHE_TTL_SECONDS: 0 }
  const [first, second] = await redis.replicas(t, 2, { clock, env })
  for (const replica of [first!, second!]) t.equal((await replica.app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.equal(await second!.metric('forge_app_installation_tokens_held'), 1, "alice's")

  upstream.installations.delete(INSTALLED.alice)
  t.equal((await githubDeliveries().deliver(first!.app, 'installation', installationPayload('deleted', INSTALLED.alice, 'alice'))).json().outcome, 'applied')
  const before = upstream.charged.length
  t.equal((await second!.app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  await second!.logs.waitFor((line) => line.msg === 'webhook drops heard from another replica')
  t.equal(await second!.metric('forge_app_installation_tokens_held'), 1, "the default's: the other replica forgot alice's token")
})

const HOUR_MS = 60 * MINUTE_MS

t.test('a public App and a one-installation App of the same installation keep apart in one Redis: answers, budget, and searches with or without is:public', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const env = { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION }
  const [oneInstallation] = await redis.replicas(t, 1, { clock, env: { ...env, FORGE_APP_PUBLIC: 'false' } })
  const [publicDeployment] = await redis.replicas(t, 1, { clock, env })
  t.equal((await oneInstallation!.app.inject({ url: usersUrl('dave') })).statusCode, 200)
  const searchesBefore = upstream.charged.filter((call) => call.path.startsWith('/search/'))
  t.equal(searchesBefore.length, 2)
  t.ok(searchesBefore.every((call) => !call.path.includes('is%3Apublic')), 'one installation: its searches count what its token sees')

  const before = upstream.charged.length
  const res = await publicDeployment!.app.inject({ url: usersUrl('dave') })
  t.equal(res.statusCode, 200)
  t.notMatch(res.headers['cache-status'], /; hit/, "not the one-installation App's answer")
  const searches = upstream.charged.slice(before).filter((call) => call.path.startsWith('/search/'))
  t.equal(searches.length, 2, 'the public App asked its own searches')
  t.ok(searches.every((call) => call.path.includes('is%3Apublic')))

  const namespaces = async (pattern: string, suffix: string) => new Set((await redis.inspector.keys(pattern)).map((key) => key.slice(0, -suffix.length)))
  t.equal((await namespaces('*answer:users/dave', 'answer:users/dave')).size, 2, 'two answers, each in its own namespace')
  t.equal((await namespaces('*budget:core', 'budget:core')).size, 2, "two budgets of the default installation's core")
})

t.test('no installation found is remembered an hour in memory: an install whose webhook was missed is used within the hour', async (t) => {
  const { app, upstream, advanceClock } = await publicApp(t)
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'dave'), new Set([`installation ${DEFAULT_INSTALLATION}`]))
  upstream.installations.set('104', installationOn('dave'))

  advanceClock(HOUR_MS - MINUTE_MS)
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(upstream.lookups, ['dave'], 'within the hour, the remembered answer')
  advanceClock(2 * MINUTE_MS)
  const before = upstream.charged.length
  t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(upstream.lookups, ['dave', 'dave'], 'past the hour, asked again')
  t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set(['installation 104']))
})

t.test('with Redis, no installation found is remembered there for an hour at most; an installation found, for longer', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const [replica] = await redis.replicas(t, 1, { clock, env: { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION } })
  for (const login of ['dave', 'alice']) t.equal((await replica!.app.inject({ url: usersUrl(login) })).statusCode, 200, login)
  const expiryOf = async (login: string) => {
    const [key] = await redis.inspector.keys(`*installation:${login}`)
    t.ok(key, `${login}'s lookup is in Redis`)
    return redis.inspector.pTTL(key!)
  }
  const dave = await expiryOf('dave')
  t.ok(dave > 0 && dave <= HOUR_MS, `dave, not installed: ${dave} ms`)
  t.ok((await expiryOf('alice')) > HOUR_MS, 'alice, installed')
})

t.test("before each call a replica reads its installation's budget from Redis: spent on one replica, the others make no call with it", async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const [first, second] = await redis.replicas(t, 2, { clock, env: { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION } })
  t.equal((await first!.app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.equal((await second!.app.inject({ url: usersUrl('bob') })).statusCode, 200, "the second replica holds a budget of its own, not alice's")
  // alice's installation is spent: the first replica learns it from the 403s it is answered.
  upstream.installations.get(INSTALLED.alice)!.core = 0
  clock.advance(2 * MINUTE_MS)
  t.equal((await first!.app.inject({ url: usersUrl('alice') })).statusCode, 200)
  t.ok(upstream.charged.some((call) => call.status === 403), 'the first replica met the limit')

  const before = upstream.charged.length
  const res = await second!.app.inject({ url: usersUrl('alice') })
  t.equal(res.statusCode, 200)
  t.match(res.headers['cache-status'], /fwd=stale/)
  t.same(upstream.charged.slice(before).filter((call) => call.credential === `installation ${INSTALLED.alice}`), [], 'no call past the limit')
})

t.test('a token forgotten by an uninstall webhook is still redacted from a late failure that quotes it', async (t) => {
  const { app, upstream, logs } = await publicApp(t, { FORGE_CACHE_TTL_SECONDS: 0, FORGE_STALE_SECONDS: 0 })
  const release = Promise.withResolvers<void>()
  upstream.holdAnswers((request) => request.path.includes('alice'), release.promise)
  const late = app.inject({ url: usersUrl('alice') })
  t.ok(await eventually(async () => upstream.heldCalls.length === 5), "alice's five calls arrived with her token")

  t.equal((await githubDeliveries().deliver(app, 'installation', installationPayload('deleted', INSTALLED.alice, 'alice'))).json().outcome, 'applied')
  upstream.failWith = 500
  release.resolve()
  const res = await late
  t.equal(res.statusCode, 500)
  t.match(res.json(), { details: /^Upstream responded 500: Upstream trouble with Bearer \[redacted\] \(App JWT \[redacted\]\)$/ })
  t.ok(upstream.tokensOf(INSTALLED.alice).length === 1)
  for (const secret of upstream.secrets()) {
    t.notOk(res.body.includes(secret), 'no token in the answer')
    t.notOk(logs.text().includes(secret), 'no token in a log line')
  }
})

t.test('with Redis, installation.created on one replica is written there: every replica, that one included, calls with the new installation', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock, { public: true })
  installAll(upstream)
  const env = { ...upstream.env, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, FORGE_CACHE_TTL_SECONDS: 0 }
  const replicas = await redis.replicas(t, 2, { clock, env })
  for (const { app } of replicas) t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
  t.same(credentialsOf(upstream, 'dave'), new Set([`installation ${DEFAULT_INSTALLATION}`]), 'looked up: no installation')

  upstream.installations.set('104', installationOn('dave'))
  t.equal((await githubDeliveries().deliver(replicas[0]!.app, 'installation', installationPayload('created', '104', 'dave'))).json().outcome, 'applied')
  for (const [index, { app }] of replicas.entries()) {
    const before = upstream.charged.length
    t.equal((await app.inject({ url: usersUrl('dave') })).statusCode, 200)
    t.same(new Set(upstream.charged.slice(before).map((call) => call.credential)), new Set(['installation 104']), `replica ${index + 1}`)
  }
  t.same(upstream.lookups, ['dave'], 'one lookup, shared through Redis; none after the delivery')
})
