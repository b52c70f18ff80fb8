import t from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import { untilRequestsIn } from '../helpers/build.ts'
import { appCallsFor, buildInMode, CREDENTIAL_MODES } from '../helpers/app-upstream.ts'
import { API, RESOURCE_HEADERS, SEARCH_HEADERS, fixtures, heldReply, makeFollowers, makeRepos, makeUser, mockSearch, mockUser, recordUnexpectedCalls } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const TTL_MS = 60_000
const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`

/** Every upstream call answers `status` from now on. */
function upstreamAnswersEverything(status: number, body: object, headers: Record<string, string> = {}): nock.Scope {
  return nock(API).get(/.*/).query(true).reply(status, body, headers).persist()
}

for (const mode of CREDENTIAL_MODES) {
  t.test(`${mode.name}: Cache-Status says how each answer was obtained (RFC 9211)`, async (t) => {
    const { app, advanceClock, appCalls, sentWith } = await buildInMode(t, mode)
    mockUser({ login: 'mona' })
    const produced = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(produced.headers['cache-status'], 'forge-aggregator; fwd=miss; stored')
    advanceClock(15_000)
    const hit = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(hit.headers['cache-status'], 'forge-aggregator; hit; ttl=45')
    advanceClock(TTL_MS)
    mockUser({ login: 'mona' })
    const revalidated = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(revalidated.headers['cache-status'], 'forge-aggregator; fwd=stale; stored')
    // The economy bar is the account's quota: five calls an answer, none for the hit, in every mode.
    t.same(await sentWith(), { [mode.accountCredential]: 10 }, 'the five calls twice, on the account’s credential')
    t.same(appCalls, appCallsFor(mode, ['mona']), 'and the App’s: one lookup for the account, one mint for its installation')
  })

  t.test(`${mode.name}: a request that waited on another one’s production says collapsed`, async (t) => {
    const { app, logs } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/hello').reply(heldReply(untilRequestsIn(logs, 3), 200, fixtures.repository, RESOURCE_HEADERS))
    const answers = await Promise.all([1, 2, 3].map(() => app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })))
    t.same(answers.map((res) => res.headers['cache-status']).sort(), [
      'forge-aggregator; fwd=miss; collapsed',
      'forge-aggregator; fwd=miss; collapsed',
      'forge-aggregator; fwd=miss; stored',
    ])
  })

  t.test(`${mode.name}: errors say the upstream was asked (Cache-Status fwd=miss)`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/gone').reply(404, { message: 'Not Found' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=gone' })
    t.equal(res.statusCode, 404)
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss')
  })

  t.test(`${mode.name}: stale-if-error: the whole upstream answering 502 past the TTL sends the last answer with Age`, async (t) => {
    const { app, advanceClock } = await buildInMode(t, mode)
    mockUser({ login: 'mona' })
    const before = await app.inject({ method: 'GET', url: usersUrl('mona') })
    advanceClock(TTL_MS + 30_000)
    upstreamAnswersEverything(502, { message: 'Bad Gateway' })
    const res = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(res.statusCode, 200)
    t.equal(res.body, before.body)
    t.equal(res.headers.age, '90')
    t.equal(res.headers['cache-control'], 'public, max-age=0')
    t.equal(res.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; fwd-status=502; detail=stale-if-error')
    t.equal(res.headers.etag, before.headers.etag)
  })

  t.test(`${mode.name}: stale-if-error covers an upstream that cannot be reached, without fwd-status`, async (t) => {
    const { app, advanceClock } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    advanceClock(TTL_MS + 1)
    nock(API).get('/repos/octocat/hello').times(3).replyWithError('socket went away')
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; detail=stale-if-error')
  })

  t.test(`${mode.name}: past TTL + FORGE_STALE_SECONDS the failure is answered as it is`, async (t) => {
    const { app, advanceClock } = await buildInMode(t, mode, { env: { FORGE_STALE_SECONDS: 100 } })
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    advanceClock(TTL_MS + 100_001)
    upstreamAnswersEverything(502, { message: 'Bad Gateway' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    t.equal(res.statusCode, 500)
  })

  t.test(`${mode.name}: a 404 past the TTL is answered 404 and drops the stale answer`, async (t) => {
    const { app, advanceClock } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    advanceClock(TTL_MS + 1)
    nock(API).get('/repos/octocat/hello').reply(404, { message: 'Not Found' })
    const gone = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    t.equal(gone.statusCode, 404)
    upstreamAnswersEverything(502, { message: 'Bad Gateway' })
    const after = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
    t.equal(after.statusCode, 500, 'nothing stale was left to send')
  })

  t.test(`${mode.name}: core budget exhausted: known users get their stale answer, new users 403 with Retry-After, and no call is made`, async (t) => {
    const { app, advanceClock, now, answerAppCalls, appCalls } = await buildInMode(t, mode)
    mockUser({ login: 'known' })
    await app.inject({ method: 'GET', url: usersUrl('known') })
    advanceClock(TTL_MS + 1)

    const reset = Math.floor(now() / 1000) + 600
    const spent = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset), 'x-ratelimit-limit': '60', 'x-ratelimit-resource': 'core' }
    const first = nock(API).get('/users/newcomer').reply(403, { message: 'API rate limit exceeded for 203.0.113.7.' }, spent)
    nock(API).get(/\/users\/newcomer\/.*/).query(true).reply(403, { message: 'API rate limit exceeded' }, spent).persist()
    mockSearch(nock(API), 'newcomer', 'issue', 1)
    mockSearch(nock(API), 'newcomer', 'pr', 1)
    const limited = await app.inject({ method: 'GET', url: usersUrl('newcomer') })
    t.equal(limited.statusCode, 403)
    first.done()
    nock.cleanAll()
    answerAppCalls()

    const unexpected = recordUnexpectedCalls(t)
    for (let index = 0; index < 5; index++) {
      const known = await app.inject({ method: 'GET', url: usersUrl('known') })
      t.equal(known.statusCode, 200)
      t.equal(known.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; detail=budget')
      const unknown = await app.inject({ method: 'GET', url: usersUrl(`new-${index}`) })
      t.equal(unknown.statusCode, 403)
      t.same(unknown.json(), { error: 'API rate limit exceeded or access forbidden' })
      t.equal(unknown.headers['retry-after'], '600')
      t.equal(unknown.headers['cache-status'], 'forge-aggregator; detail=budget')
    }
    t.same(unexpected, [], 'not one call into the spent budget, not even a search')

    advanceClock(600_001)
    const resumed = mockUser({ login: 'known' })
    const fresh = await app.inject({ method: 'GET', url: usersUrl('known') })
    t.equal(fresh.headers['cache-status'], 'forge-aggregator; fwd=stale; stored', 'after the reset the upstream is asked again')
    resumed.done()
    // Each account looked up once, its answer (installed or not) remembered; the budget refused before any token was needed again.
    t.same(appCalls, appCallsFor(mode, ['known', 'newcomer', 'new-0', 'new-1', 'new-2', 'new-3', 'new-4']))
  })

  t.test(`${mode.name}: below FORGE_BUDGET_RESERVE of the core limit, known users are served stale without revalidation; new users are answered`, async (t) => {
    const { app, advanceClock, now } = await buildInMode(t, mode, { env: { FORGE_BUDGET_RESERVE: 0.1 } })
    const low = { ...RESOURCE_HEADERS, 'x-ratelimit-remaining': '400', 'x-ratelimit-limit': '5000', 'x-ratelimit-reset': String(Math.floor(now() / 1000) + 900) }
    nock(API).get('/repos/octocat/known').reply(200, fixtures.repository, low)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    advanceClock(TTL_MS + 1)
    const unexpected = recordUnexpectedCalls(t)
    const known = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    t.equal(known.statusCode, 200)
    t.equal(known.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; detail=budget')
    t.equal(known.headers.age, '60')
    t.same(unexpected, [])
    const newcomer = nock(API).get('/repos/octocat/newcomer').reply(200, fixtures.repository, low)
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=newcomer' })
    t.equal(res.statusCode, 200)
    newcomer.done()
  })

  t.test(`${mode.name}: below FORGE_BUDGET_RESERVE, a known user past the TTL is served stale and none of its five calls is made, searches included; a new user is answered`, async (t) => {
    const { app, advanceClock, now, logs } = await buildInMode(t, mode, { env: { FORGE_BUDGET_RESERVE: 0.1 } })
    // 400 of 5,000 left, for another 15 minutes: below the reserve's 500.
    const low = { ...RESOURCE_HEADERS, 'x-ratelimit-remaining': '400', 'x-ratelimit-limit': '5000', 'x-ratelimit-reset': String(Math.floor(now() / 1000) + 900) }
    const upstreamUser = (login: string) => {
      const scope = nock(API)
      scope.get(`/users/${login}`).reply(200, makeUser(login, { public_repos: 2 }), low)
      scope.get(`/users/${login}/repos`).query(true).reply(200, makeRepos(login, 2), low)
      scope.get(`/users/${login}/followers`).query(true).reply(200, makeFollowers(1), low)
      mockSearch(scope, login, 'issue', 1)
      mockSearch(scope, login, 'pr', 1)
      return scope
    }
    upstreamUser('known')
    t.equal((await app.inject({ method: 'GET', url: usersUrl('known') })).statusCode, 200)
    advanceClock(TTL_MS + 1)

    const unexpected = recordUnexpectedCalls(t)
    const known = await app.inject({ method: 'GET', url: usersUrl('known') })
    t.equal(known.statusCode, 200)
    t.equal(known.headers['cache-status'], 'forge-aggregator; hit; fwd=stale; detail=budget')
    t.equal(known.headers.age, '60')
    // The stale answer goes as soon as one call is refused: the other four are judged after it.
    const refused = () => logs.lines.filter((line) => line.msg === 'upstream rate limit spent; call not made' && (line.upstream as { path: string }).path.includes('known'))
    t.ok(await eventually(async () => refused().length + unexpected.length >= 5), 'each of the five calls was made or refused')
    t.same(unexpected, [], 'not one call made: profile, repositories, followers and both searches alike')
    t.equal(refused().length, 5)

    const newcomer = upstreamUser('newcomer')
    const answered = await app.inject({ method: 'GET', url: usersUrl('newcomer') })
    t.equal(answered.statusCode, 200)
    t.equal(answered.headers['x-forge-partial'], undefined, 'its searches too')
    newcomer.done()
  })

  t.test(`${mode.name}: search budget exhausted: the partial answer is reused within the TTL, still no-store and X-Forge-Partial`, async (t) => {
    const { app, advanceClock, now } = await buildInMode(t, mode)
    const reset = String(Math.floor(now() / 1000) + 30)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, { ...fixtures.user, login: 'mona', public_repos: 0 }, RESOURCE_HEADERS)
    scope.get('/users/mona/repos').query(true).reply(200, [], RESOURCE_HEADERS)
    scope.get('/users/mona/followers').query(true).reply(200, [], RESOURCE_HEADERS)
    scope
      .get('/search/issues')
      .query(true)
      .times(2)
      .reply(403, { message: 'API rate limit exceeded' }, { ...SEARCH_HEADERS, 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset })
    const first = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(first.headers['x-forge-partial'], 'totalIssues, totalPRs')
    t.equal(first.headers['cache-status'], 'forge-aggregator; fwd=miss; stored')
    scope.done()

    const unexpected = recordUnexpectedCalls(t)
    for (let index = 0; index < 20; index++) {
      const again = await app.inject({ method: 'GET', url: usersUrl('mona') })
      t.equal(again.body, first.body)
      t.equal(again.headers['x-forge-partial'], 'totalIssues, totalPRs')
      t.equal(again.headers['cache-control'], 'no-store')
    }
    t.same(unexpected, [], 'twenty repeats, no call')

    advanceClock(30_001)
    const complete = mockUser({ login: 'mona' })
    const after = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(after.headers['x-forge-partial'], undefined, 'asked again once the search budget reset')
    complete.done()
  })

  t.test(`${mode.name}: a partial answer because a search failed otherwise is not stored, and Cache-Status says so`, async (t) => {
    const { app, advanceClock, answerAppCalls } = await buildInMode(t, mode)
    const partialUser = () => {
      const scope = nock(API)
      scope.get('/users/mona').reply(200, { ...fixtures.user, login: 'mona', public_repos: 0 }, RESOURCE_HEADERS)
      scope.get('/users/mona/repos').query(true).reply(200, [], RESOURCE_HEADERS)
      scope.get('/users/mona/followers').query(true).reply(200, [], RESOURCE_HEADERS)
      scope.get('/search/issues').query(true).times(6).reply(503, { message: 'unavailable' })
    }
    partialUser()
    const missed = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(missed.headers['cache-status'], 'forge-aggregator; fwd=miss')
    nock.cleanAll()
    answerAppCalls()

    mockUser({ login: 'mona' })
    await app.inject({ method: 'GET', url: usersUrl('mona') })
    advanceClock(TTL_MS + 1)
    partialUser()
    const revalidated = await app.inject({ method: 'GET', url: usersUrl('mona') })
    t.equal(revalidated.headers['x-forge-partial'], 'totalIssues, totalPRs')
    t.equal(revalidated.headers['cache-status'], 'forge-aggregator; fwd=stale')
  })

  t.test(`${mode.name}: every upstream line of a request carries the caller’s request id`, async (t) => {
    const { app, logs, appCalls } = await buildInMode(t, mode)
    mockUser({ login: 'mona' })
    mockUser({ login: 'hubot' })
    await Promise.all([
      app.inject({ method: 'GET', url: usersUrl('mona'), headers: { 'x-request-id': 'caller-mona-1' } }),
      app.inject({ method: 'GET', url: usersUrl('hubot'), headers: { 'x-request-id': 'caller-hubot-2' } }),
    ])
    const upstreamLines = logs.lines.filter((line) => line.msg === 'upstream call')
    // Searches name the user as `author%3A<login>`: every path of a user's calls holds the login.
    const reqIdOf = (login: string) => upstreamLines.filter((line) => (line.upstream as { path: string }).path.includes(login)).map((line) => line.reqId)
    t.same(reqIdOf('mona'), Array(5).fill('caller-mona-1'))
    t.same(reqIdOf('hubot'), Array(5).fill('caller-hubot-2'))
    // Two accounts at once: a lookup each, and one mint that both waited on.
    t.same({ lookups: [...appCalls.lookups].sort(), mints: appCalls.mints }, appCallsFor(mode, ['hubot', 'mona']))
  })

  t.test(`${mode.name}: FORGE_BUDGET_RESERVE 0: a known user past the TTL is revalidated whatever is left`, async (t) => {
    const { app, advanceClock, now } = await buildInMode(t, mode, { env: { FORGE_BUDGET_RESERVE: 0 } })
    const low = { ...RESOURCE_HEADERS, 'x-ratelimit-remaining': '400', 'x-ratelimit-limit': '5000', 'x-ratelimit-reset': String(Math.floor(now() / 1000) + 900) }
    nock(API).get('/repos/octocat/known').reply(200, fixtures.repository, low)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    advanceClock(TTL_MS + 1)
    const revalidation = nock(API).get('/repos/octocat/known').reply(304, '', low)
    const known = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    t.equal(known.headers['cache-status'], 'forge-aggregator; fwd=stale; stored')
    revalidation.done()
  })

  t.test(`${mode.name}: a 304’s X-RateLimit-* feeds the budget: remaining 0 on a revalidation makes the next call refused`, async (t) => {
    const { app, advanceClock, now } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/known').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    advanceClock(TTL_MS + 1)
    const reset = Math.floor(now() / 1000) + 300
    const spent = { ...RESOURCE_HEADERS, 'x-ratelimit-remaining': '0', 'x-ratelimit-limit': '60', 'x-ratelimit-reset': String(reset) }
    nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } }).get('/repos/octocat/known').reply(304, '', spent)
    const revalidated = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=known' })
    t.equal(revalidated.statusCode, 200)
    const unexpected = recordUnexpectedCalls(t)
    const refused = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=other' })
    t.equal(refused.statusCode, 403)
    t.equal(refused.headers['retry-after'], '300')
    t.equal(refused.headers['cache-status'], 'forge-aggregator; detail=budget')
    t.same(unexpected, [], 'no call into the budget the 304 said was spent')
  })
}
