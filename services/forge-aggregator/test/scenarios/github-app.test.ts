import { generateKeyPairSync } from 'node:crypto'
import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { buildAggregator, testClock, type TestClock, type TestEnv } from '../helpers/build.ts'
import { INSTALLATION_ID, startAppUpstream, TOKEN_LIFETIME_MS, type AppUpstream } from '../helpers/app-upstream.ts'

const MINUTE_MS = 60_000
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`
/** The five calls of one `users` answer. */
const USER_CALLS = 5

async function appAggregator(t: Test, env: TestEnv = {}, clock: TestClock = testClock()) {
  const upstream = await startAppUpstream(t, clock)
  // Tokens are the subject, not time: the fake GitHub runs in this process, checking every call's
  // JWT or token, and 250 calls at once on a crowded machine outlasted the default 10 s.
  const aggregator = await buildAggregator(t, { clock, env: { ...upstream.env, FORGE_TIMEOUT_MS: 60_000, ...env } })
  return { upstream, ...aggregator }
}

/**
 * Each credential the upstream saw, and the parts of each JWT (its claims and signature are
 * its own; a JWT shortened by a message's length limit still shows them).
 */
function secretsOf(upstream: AppUpstream): string[] {
  return [...upstream.minted, ...upstream.jwts, ...upstream.jwts.flatMap((jwt) => jwt.split('.').slice(1))]
}

const bearers = (upstream: AppUpstream) => upstream.requests.filter((request) => !request.path.startsWith('/app/')).map((request) => request.authorization)

t.test('the start-up line names the App and its installation, never its private key', async (t) => {
  const { upstream, logs } = await appAggregator(t)
  t.match(logs.lines.find((line) => line.msg === 'forge upstream'), {
    authenticated: true,
    githubApp: { id: upstream.env.FORGE_APP_ID, installation: upstream.env.FORGE_APP_INSTALLATION_ID },
  })
  t.notMatch(logs.text(), 'PRIVATE KEY')
})

t.test('the first request mints one installation token and every call carries it; requests within its life mint none', async (t) => {
  const { app, upstream, advanceClock } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0 })
  t.equal((await app.inject({ url: usersUrl('mona') })).statusCode, 200)
  t.equal(upstream.minted.length, 1)
  t.same(new Set(bearers(upstream)), new Set([`Bearer ${upstream.minted[0]}`]))
  t.same(upstream.requests[0], { method: 'POST', path: '/app/installations/9001/access_tokens', authorization: `Bearer ${upstream.jwts[0]}`, ifNoneMatch: undefined })

  advanceClock(TOKEN_LIFETIME_MS - 6 * MINUTE_MS)
  t.equal((await app.inject({ url: usersUrl('octo') })).statusCode, 200)
  t.equal(upstream.minted.length, 1, 'still the first token, 54 minutes on')
})

t.test('renewal comes 5 minutes before expires_at: no request fails and no cached answer is lost', async (t) => {
  const { app, upstream, advanceClock } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 3600 })
  t.equal((await app.inject({ url: usersUrl('mona') })).statusCode, 200)
  const callsBefore = upstream.calls().length

  advanceClock(TOKEN_LIFETIME_MS - 5 * MINUTE_MS)
  const cached = await app.inject({ url: usersUrl('mona') })
  t.equal(cached.statusCode, 200)
  t.match(cached.headers['cache-status'], /; hit;/)
  t.equal(upstream.calls().length, callsBefore, 'a cached user costs no upstream call after the renewal window opens')

  const other = await app.inject({ url: usersUrl('octo') })
  t.equal(other.statusCode, 200)
  t.equal(upstream.minted.length, 2, 'renewed before it expired: no call was refused')
  t.notOk(upstream.requests.some((request) => request.path !== '/app/installations/9001/access_tokens' && request.authorization === ''), 'no call without a token')
  t.same(bearers(upstream).slice(-USER_CALLS), Array(USER_CALLS).fill(`Bearer ${upstream.minted[1]}`))
})

t.test('held ETags survive a renewal: the answer past its TTL is revalidated with If-None-Match under the new token', async (t) => {
  const { app, upstream, advanceClock } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 60 })
  await app.inject({ url: usersUrl('mona') })
  advanceClock(TOKEN_LIFETIME_MS - 4 * MINUTE_MS)
  const res = await app.inject({ url: usersUrl('mona') })
  t.equal(res.statusCode, 200)
  t.equal(upstream.minted.length, 2)
  const profile = upstream.requests.filter((request) => request.path === '/users/mona')
  t.equal(profile.length, 2)
  t.ok(profile[1]!.ifNoneMatch, 'revalidated, not asked afresh')
  t.equal(profile[1]!.authorization, `Bearer ${upstream.minted[1]}`)
})

t.test('50 concurrent requests when the token is due make one renewal', async (t) => {
  const { app, upstream, advanceClock } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0 })
  await app.inject({ url: usersUrl('mona') })
  advanceClock(TOKEN_LIFETIME_MS)
  const answers = await Promise.all(Array.from({ length: 50 }, (_, index) => app.inject({ url: usersUrl(`user-${index}`) })))
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]), `other answers: ${[...new Set(answers.filter((res) => res.statusCode !== 200).map((res) => res.body))].join(' | ')}`)
  t.equal(upstream.minted.length, 2)
})

t.test('a revoked token: the service renews once and the request succeeds', async (t) => {
  const { app, upstream, logs } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0 })
  await app.inject({ url: usersUrl('mona') })
  upstream.revoke(upstream.minted[0]!)
  const res = await app.inject({ url: usersUrl('mona') })
  t.equal(res.statusCode, 200)
  t.equal(upstream.minted.length, 2, 'the five refused calls shared one renewal')
  t.match(logs.text(), 'installation token refused; renewing it once')
})

t.test('a 401 for a token already renewed keeps the renewed one: one renewal, every call succeeds', async (t) => {
  const { app, upstream } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0 })
  t.equal((await app.inject({ url: usersUrl('mona') })).statusCode, 200)
  const [old] = upstream.minted
  upstream.revoke(old!)
  // The profile call's 401 comes last, once the other calls' 401s have had a token renewed and
  // a call carrying the new one has arrived.
  const renewed = upstream.untilRequested((request) => upstream.minted.length === 2 && request.authorization === `Bearer ${upstream.minted[1]}`)
  upstream.holdAnswers((request) => request.path === '/users/octo' && request.authorization === `Bearer ${old}`, renewed)
  const res = await app.inject({ url: usersUrl('octo') })
  t.equal(res.statusCode, 200)
  t.equal(upstream.minted.length, 2, 'the late 401 for the old token renewed nothing')
  const profileCalls = upstream.requests.filter((request) => request.path === '/users/octo').map((request) => request.authorization)
  t.same(profileCalls, [`Bearer ${old}`, `Bearer ${upstream.minted[1]}`], 'refused with the old token, then made with the renewed one')
  t.equal((await app.inject({ url: usersUrl('lisa') })).statusCode, 200)
  t.equal(upstream.minted.length, 2, 'the renewed token is still the one held')
})

t.test('a second 401 is 500 Failed to fetch forge data, and says no secret though the upstream quoted the token', async (t) => {
  // No stale answer to fall back on: the failure itself is the answer.
  const { app, upstream, logs } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0, FORGE_STALE_SECONDS: 0 })
  await app.inject({ url: usersUrl('mona') })
  upstream.refuseTokens = true
  const res = await app.inject({ url: usersUrl('mona') })
  t.equal(res.statusCode, 500)
  t.match(res.json(), { error: 'Failed to fetch forge data', details: /^Upstream responded 401: Bad credentials: Bearer \[redacted\]$/ })
  t.equal(upstream.minted.length, 2, 'renewed once, not in a loop')
  for (const secret of secretsOf(upstream)) {
    t.notMatch(res.body, secret)
    t.notMatch(logs.text(), secret)
  }
})

t.test('a failure answered for a call made with the token before a renewal names neither token nor the JWT', async (t) => {
  const { app, upstream, logs, advanceClock } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0, FORGE_STALE_SECONDS: 0 })
  t.equal((await app.inject({ url: usersUrl('mona') })).statusCode, 200)
  const release = Promise.withResolvers<void>()
  upstream.holdAnswers((request) => request.path.includes('lisa'), release.promise)
  const late = app.inject({ url: usersUrl('lisa') })
  await upstream.untilRequested((request) => request.path === '/users/lisa')

  // Meanwhile another request renews the token: lisa's calls carry the one before.
  advanceClock(TOKEN_LIFETIME_MS - 4 * MINUTE_MS)
  t.equal((await app.inject({ url: usersUrl('octo') })).statusCode, 200)
  t.equal(upstream.minted.length, 2)
  upstream.failWith = 500
  release.resolve()

  const res = await late
  t.equal(res.statusCode, 500)
  t.match(res.json(), { details: /^Upstream responded 500: Upstream trouble with Bearer \[redacted\] \(App JWT \[redacted\]\)$/ })
  t.equal(upstream.requests.filter((request) => request.path.includes('lisa')).length, USER_CALLS, 'a 500 is no reason to renew the token and call again')
  t.equal(upstream.minted.length, 2)
  for (const secret of secretsOf(upstream)) {
    t.notMatch(res.body, secret)
    t.notMatch(logs.text(), secret)
  }
})

t.test('after a 401 has renewed the token, a late failure that quotes the refused token names neither token nor the JWT', async (t) => {
  const { app, upstream, logs } = await appAggregator(t, { FORGE_CACHE_TTL_SECONDS: 0, FORGE_STALE_SECONDS: 0 })
  t.equal((await app.inject({ url: usersUrl('mona') })).statusCode, 200)
  const [refused] = upstream.minted
  // lisa's five calls reach the upstream with the first token, and their answers are held.
  const release = Promise.withResolvers<void>()
  upstream.holdAnswers((request) => request.path.includes('lisa'), release.promise)
  const late = app.inject({ url: usersUrl('lisa') })
  t.ok(await eventually(async () => upstream.requests.filter((request) => request.path.includes('lisa')).length === USER_CALLS), "lisa's calls arrived")

  // Meanwhile the token is revoked: octo's calls are refused (401), and the token renewed.
  upstream.revoke(refused!)
  t.equal((await app.inject({ url: usersUrl('octo') })).statusCode, 200)
  t.equal(upstream.minted.length, 2, 'renewed after the 401')
  t.match(logs.text(), 'installation token refused; renewing it once')
  // Then lisa's calls fail, their message quoting the token they carried: the refused one.
  upstream.failWith = 500
  release.resolve()

  const res = await late
  t.equal(res.statusCode, 500)
  t.match(res.json(), { details: /^Upstream responded 500: Upstream trouble with Bearer \[redacted\] \(App JWT \[redacted\]\)$/ })
  t.ok(upstream.requests.filter((request) => request.path.includes('lisa')).every((request) => request.authorization === `Bearer ${refused}`), 'made with the refused token only')
  for (const secret of secretsOf(upstream)) {
    t.notMatch(res.body, secret)
    t.notMatch(logs.text(), secret)
  }
})

t.test('a JWT the upstream refuses (wrong key) is a 500 that names no secret', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const { app, logs } = await buildAggregator(t, { clock, env: { ...upstream.env, FORGE_APP_PRIVATE_KEY: other } })
  const res = await app.inject({ url: usersUrl('mona') })
  t.equal(res.statusCode, 500)
  t.match(res.json(), { error: 'Failed to fetch forge data', details: 'GitHub App installation token request answered 401' })
  t.same(upstream.calls(), [], 'no installation call without a token')
  t.ok(upstream.jwts.length > 0)
  for (const secret of secretsOf(upstream)) t.notMatch(res.body + logs.text(), secret)
})

t.test('a token answer that is not JSON, or has no token, is a 500 that names no secret', async (t) => {
  const { app, upstream } = await appAggregator(t, { FORGE_STALE_SECONDS: 0 })
  for (const body of ['<html>', '{"expires_at":"2030-01-01T00:00:00Z"}']) {
    upstream.mintBody = body
    const res = await app.inject({ url: usersUrl('mona') })
    t.equal(res.statusCode, 500)
    t.match(res.json(), { error: 'Failed to fetch forge data', details: 'GitHub App installation token request answered 201 with an unexpected body' })
  }
  t.same(upstream.calls(), [])
})

t.test('list mode: the installation on FORGE_DEFAULT_USER lists its repositories, private included, most recently updated first', async (t) => {
  const { app, upstream } = await appAggregator(t, { FORGE_DEFAULT_USER: 'mona' })
  const res = await app.inject({ url: '/api/forge/repos' })
  t.equal(res.statusCode, 200)
  const names = res.json<{ repos: { name: string }[] }>().repos.map((repo) => repo.name)
  t.same(names.slice(0, 2), ['secret', 'recent'], 'page 2\'s newest first')
  t.equal(names.length, 100, 'as many as one page of the public list')
  t.notOk(names.includes('never'), 'the one never updated comes last, cut off')
  t.match(res.headers['cache-control'], /^private/)
  t.same(upstream.calls(), ['/installation/repositories?per_page=100&page=1', '/installation/repositories?per_page=100&page=2'])
  t.ok(upstream.requests.some((request) => request.path === '/app/installations/9001' && request.authorization === `Bearer ${upstream.jwts.at(-1)}`))
})

t.test('list mode: an installation on another account, or on selected repositories only, gives the public list', async (t) => {
  const { app, upstream } = await appAggregator(t, { FORGE_DEFAULT_USER: 'octo', FORGE_CACHE_TTL_SECONDS: 0 })
  t.equal((await app.inject({ url: '/api/forge/repos' })).statusCode, 200)
  t.same(upstream.calls(), ['/users/octo/repos?sort=updated&per_page=100'])
  Object.assign(upstream.installations.get(INSTALLATION_ID)!, { login: 'octo', selection: 'selected' })
  // The account is remembered: what changed upstream does not change the answer until a restart.
  t.equal((await app.inject({ url: '/api/forge/repos' })).statusCode, 200)
  t.equal(upstream.requests.filter((request) => request.path === '/app/installations/9001').length, 1, 'the account is asked once per process')
})

t.test('list mode: an installation with only selected repositories gives the public list; a failed account lookup too, asked again next time', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  Object.assign(upstream.installations.get(INSTALLATION_ID)!, { login: 'mona', selection: 'selected' })
  const { app } = await buildAggregator(t, { clock, env: { ...upstream.env, FORGE_DEFAULT_USER: 'mona', FORGE_CACHE_TTL_SECONDS: 0 } })
  await app.inject({ url: '/api/forge/repos' })
  t.same(upstream.calls(), ['/users/mona/repos?sort=updated&per_page=100'])

  const broken = await startAppUpstream(t, clock)
  const { app: other, logs } = await buildAggregator(t, {
    clock,
    env: { ...broken.env, FORGE_APP_INSTALLATION_ID: '1', FORGE_DEFAULT_USER: 'mona', FORGE_CACHE_TTL_SECONDS: 0 },
  })
  // Installation 1 does not exist: no token, no account; the answer is the token's failure.
  t.equal((await other.inject({ url: '/api/forge/repos' })).statusCode, 500)
  t.match(logs.text(), 'could not tell whose account the GitHub App is installed on')
  t.equal(broken.requests.filter((request) => request.path === '/app/installations/1').length, 1)
  await other.inject({ url: '/api/forge/repos' })
  t.equal(broken.requests.filter((request) => request.path === '/app/installations/1').length, 2, 'a failed lookup is not remembered')
})

t.test('/metrics shows the installation\'s rate-limit budget', async (t) => {
  const { app, upstream, metric } = await appAggregator(t)
  upstream.rateLimit['x-ratelimit-limit'] = '12500'
  upstream.rateLimit['x-ratelimit-remaining'] = '12000'
  await app.inject({ url: '/api/forge/repos?repo_name=x' }).catch(() => undefined)
  await app.inject({ url: usersUrl('mona') })
  t.equal(await metric('forge_ratelimit_remaining', { resource: 'core' }), 12000)
})

t.test('with Redis: two replicas of one installation share answers and budget; no JWT or token reaches Redis, a response or a log line', async (t) => {
  const redis = await startPrivateRedis({ durable: false })
  // Stopped whatever happens next: a test that fails before its teardown is registered leaves
  // redis-server running, and the file waits on it until tap's time limit.
  t.teardown(() => redis.dispose())
  const inspector = createClient({ url: `redis://127.0.0.1:${redis.port}` })
  // A connection error the client retries by itself; without a listener it would be thrown.
  inspector.on('error', () => {})
  t.teardown(() => inspector.destroy())
  await inspector.connect()
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const env = { ...upstream.env, REDIS_URL: `redis://127.0.0.1:${redis.port}`, FORGE_CACHE_TTL_SECONDS: 3600 }
  const one = await buildAggregator(t, { clock, env })
  const two = await buildAggregator(t, { clock, env })

  const first = await one.app.inject({ url: usersUrl('mona') })
  t.equal(first.statusCode, 200)
  const callsBefore = upstream.calls().length
  // Past replica one's renewal time, replica two gets replica one's answer: the namespace is the
  // installation's, not the token's.
  clock.advance(TOKEN_LIFETIME_MS - 4 * MINUTE_MS)
  const second = await two.app.inject({ url: usersUrl('mona') })
  t.equal(second.statusCode, 200)
  t.match(second.headers['cache-status'], /; hit;/)
  t.equal(upstream.calls().length, callsBefore, 'the other replica\'s answer: no upstream call')

  // The installation's budget, spent on replica one, stops replica two.
  upstream.rateLimit['x-ratelimit-remaining'] = '0'
  t.equal((await one.app.inject({ url: usersUrl('octo') })).statusCode, 200)
  const refused = await two.app.inject({ url: usersUrl('someone-new') })
  t.equal(refused.statusCode, 403)
  t.equal(upstream.calls().filter((path) => path.includes('someone-new')).length, 0)

  const keys = await inspector.keys('*')
  t.ok(keys.length > 3)
  const stored = keys.join('\n') + (await Promise.all(keys.map(async (key) => (await inspector.type(key)) === 'string' ? await inspector.get(key) : ''))).join('\n')
  const responses = [first, second, refused].map((res) => res.body + JSON.stringify(res.headers)).join('\n')
  const logs = one.logs.text() + two.logs.text()
  t.ok(upstream.minted.length >= 1 && upstream.jwts.length >= 1)
  for (const secret of [...upstream.minted, ...upstream.jwts]) {
    t.notOk(stored.includes(secret), 'not in Redis')
    t.notOk(responses.includes(secret), 'not in a response')
    t.notOk(logs.includes(secret), 'not in a log line (trace level)')
  }
})
