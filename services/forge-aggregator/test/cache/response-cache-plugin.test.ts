import t from 'tap'
import nock from 'nock'
import { buildAggregator, untilRequestsIn } from '../helpers/build.ts'
import { UserAnswer } from '../../src/http/users.ts'
import { API, RESOURCE_HEADERS, SEARCH_HEADERS, heldReply, makeRepos, makeUser, mockHeldUser, mockUser, recordUnexpectedCalls, searchResult } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const USERS = '/api/forge/users?user_name=mona'

t.test('within FORGE_CACHE_TTL_SECONDS a repeated request makes no upstream call', async (t) => {
  const { app, advanceClock } = await buildAggregator(t)
  const unexpected = recordUnexpectedCalls(t)
  const scope = mockUser({ login: 'mona' })
  const first = await app.inject({ method: 'GET', url: USERS })
  advanceClock(59_000)
  const second = await app.inject({ method: 'GET', url: USERS })
  t.equal(second.statusCode, 200)
  t.equal(second.body, first.body)
  scope.done()
  t.same(unexpected, [], 'the second request cost nothing upstream')
})

t.test('a fresh answer held in memory is sent at once: sendAnswer returns a promise only when it must wait', async (t) => {
  const { app } = await buildAggregator(t)
  mockUser({ login: 'mona' })
  const returned: unknown[] = []
  // Its answer is serialized with the route's 200 schema, as the users route's is.
  app.get('/probe', { schema: { response: { 200: UserAnswer } } }, (_request, reply) => {
    const sending = reply.sendAnswer({
      endpoint: 'users',
      key: 'users/mona',
      produce: (call) => app.forge.service.userOverview('mona', call),
      errorAnswer: (error) => error,
    })
    returned.push(sending)
    return sending
  })
  const miss = await app.inject({ method: 'GET', url: '/probe' })
  const hit = await app.inject({ method: 'GET', url: '/probe' })
  t.equal(miss.statusCode, 200)
  t.equal(hit.statusCode, 200)
  t.equal(hit.body, miss.body)
  t.match(hit.headers['cache-status'], /; hit; ttl=\d+$/)
  t.ok(returned[0] instanceof Promise, 'a miss waits for the upstream')
  t.equal(returned[1], undefined, 'a hit is sent before sendAnswer returns')
})

t.test('user names differing only in case share one cache entry', async (t) => {
  const { app } = await buildAggregator(t)
  const unexpected = recordUnexpectedCalls(t)
  mockUser({ login: 'mona' })
  await app.inject({ method: 'GET', url: USERS })
  const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=MONA' })
  t.equal(res.statusCode, 200)
  t.same(unexpected, [])
})

t.test('after the TTL, held resources are revalidated with If-None-Match and a 304 reuses them; searches are asked again', async (t) => {
  const { app, advanceClock } = await buildAggregator(t)
  const first = mockUser({ login: 'mona', issues: 7, prs: 3 })
  const before = await app.inject({ method: 'GET', url: USERS })
  first.done()
  advanceClock(60_001)

  const revalidated = { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } }
  const again = nock(API, revalidated)
  again.get('/users/mona').reply(304, '', RESOURCE_HEADERS)
  again.get('/users/mona/repos').query(true).reply(304, '', RESOURCE_HEADERS)
  again.get('/users/mona/followers').query(true).reply(304, '', RESOURCE_HEADERS)
  const searches = nock(API, { badheaders: ['if-none-match'] })
  searches.get('/search/issues').query({ q: 'author:mona is:issue', per_page: '1' }).reply(200, searchResult(8), SEARCH_HEADERS)
  searches.get('/search/issues').query({ q: 'author:mona is:pr', per_page: '1' }).reply(200, searchResult(3), SEARCH_HEADERS)

  const after = await app.inject({ method: 'GET', url: USERS })
  t.equal(after.statusCode, 200)
  again.done()
  searches.done()
  const [was, is] = [before.json<{ stats: object; user: object }>(), after.json<{ stats: object; user: object }>()]
  t.same(is.user, was.user, 'the profile came from the held body')
  t.match(is.stats, { totalIssues: 8, totalPRs: 3 })
})

t.test('200 concurrent requests for one uncached user cost exactly the five calls of one request', async (t) => {
  const { app, logs } = await buildAggregator(t)
  const unexpected = recordUnexpectedCalls(t)
  const scope = mockHeldUser('mona', untilRequestsIn(logs, 200))

  const responses = await Promise.all(Array.from({ length: 200 }, () => app.inject({ method: 'GET', url: USERS })))
  t.same(new Set(responses.map((res) => res.statusCode)), new Set([200]))
  t.equal(new Set(responses.map((res) => res.body)).size, 1, 'every caller got the same answer')
  scope.done()
  t.same(unexpected, [], 'five calls, no more')
})

t.test('concurrent requests that fail share the one failure, and it is not kept', async (t) => {
  const { app, logs } = await buildAggregator(t)
  const scope = nock(API).get('/repos/octocat/gone').times(2).reply(heldReply(untilRequestsIn(logs, 20), 404, { message: 'Not Found' }))
  const answers = await Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=gone' })))
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([404]))
  t.equal(scope.pendingMocks().length, 1, 'the twenty cost one call')
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=gone' })
  scope.done()
})

t.test('a successful answer carries ETag and Cache-Control: public, max-age=<seconds left>', async (t) => {
  const { app, advanceClock } = await buildAggregator(t)
  mockUser({ login: 'mona' })
  const first = await app.inject({ method: 'GET', url: USERS })
  t.match(first.headers.etag, /^"[A-Za-z0-9_-]{27}"$/)
  t.equal(first.headers['cache-control'], 'public, max-age=60')
  advanceClock(15_400)
  const later = await app.inject({ method: 'GET', url: USERS })
  t.equal(later.headers['cache-control'], 'public, max-age=44')
  t.equal(later.headers.etag, first.headers.etag)
})

t.test("a caller's matching If-None-Match gets 304 without a body", async (t) => {
  const { app } = await buildAggregator(t)
  mockUser({ login: 'mona' })
  const { headers } = await app.inject({ method: 'GET', url: USERS })
  const etag = String(headers.etag)

  for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await app.inject({ method: 'GET', url: USERS, headers: { 'if-none-match': ifNoneMatch } })
    t.equal(res.statusCode, 304, ifNoneMatch)
    t.equal(res.body, '', ifNoneMatch)
    t.equal(res.headers.etag, etag)
    t.match(res.headers['cache-control'], /^public, max-age=\d+$/)
  }
  const stale = await app.inject({ method: 'GET', url: USERS, headers: { 'if-none-match': '"something-else"' } })
  t.equal(stale.statusCode, 200)
})

t.test('both repos modes carry ETag and Cache-Control, and honour If-None-Match', async (t) => {
  const { app } = await buildAggregator(t)
  nock(API).get('/repos/octocat/hello').reply(200, { stargazers_count: 1, forks_count: 2, private: false })
  nock(API).get('/users/octocat/repos').query(true).reply(200, [])
  for (const url of ['/api/forge/repos?repo_name=hello', '/api/forge/repos']) {
    const res = await app.inject({ method: 'GET', url })
    t.equal(res.headers['cache-control'], 'public, max-age=60', url)
    const again = await app.inject({ method: 'GET', url, headers: { 'if-none-match': String(res.headers.etag) } })
    t.equal(again.statusCode, 304, url)
  }
})

t.test('errors carry Cache-Control: no-store and are not cached', async (t) => {
  const { app } = await buildAggregator(t)
  const scope = nock(API).get('/repos/octocat/missing').times(2).reply(404, { message: 'Not Found' })
  const first = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=missing' })
  const second = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=missing' })
  t.equal(first.headers['cache-control'], 'no-store')
  t.equal(second.statusCode, 404)
  scope.done()
})

t.test('a partial answer is not cached: the next request asks every call again', async (t) => {
  const { app } = await buildAggregator(t)
  const partial = nock(API)
  partial.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }), RESOURCE_HEADERS)
  partial.get('/users/mona/repos').query(true).reply(200, makeRepos('mona', 1), RESOURCE_HEADERS)
  partial.get('/users/mona/followers').query(true).reply(200, [], RESOURCE_HEADERS)
  partial.get('/search/issues').query(true).times(2).reply(503, { message: 'unavailable' }).persist()
  const first = await app.inject({ method: 'GET', url: USERS })
  t.equal(first.headers['x-forge-partial'], 'totalIssues, totalPRs')
  t.equal(first.headers['content-type'], 'application/json; charset=utf-8')
  nock.cleanAll()

  const complete = mockUser({ login: 'mona' }, nock(API))
  const second = await app.inject({ method: 'GET', url: USERS })
  t.equal(second.headers['x-forge-partial'], undefined)
  t.equal(second.headers['cache-control'], 'public, max-age=60')
  complete.done()
})

t.test('answers hold a third of FORGE_CACHE_MAX_MB: with 1, an answer of exactly a third of a MiB (rounded down) is kept, one a byte larger is not', async (t) => {
  // Held projections have the other two thirds (upstream/client.test.ts): together, the setting.
  const { app } = await buildAggregator(t, { env: { FORGE_CACHE_MAX_MB: 1 } })
  const third = 349_525
  const ask = (login: string) => app.inject({ method: 'GET', url: `/api/forge/users?user_name=${login}` })
  // Logins of one length: only the bio changes an answer's size, character for character.
  mockUser({ login: 'base1', profile: { bio: '' } })
  const base = (await ask('base1')).body.length

  mockUser({ login: 'fits1', profile: { bio: 'x'.repeat(third - base) } })
  t.equal((await ask('fits1')).body.length, third)
  t.match((await ask('fits1')).headers['cache-status'], /; hit;/, 'kept: asked again, it is a hit')

  const over = mockUser({ login: 'over1', profile: { bio: 'x'.repeat(third - base + 1) } })
  mockUser({ login: 'over1', profile: { bio: 'x'.repeat(third - base + 1) } }, over)
  t.equal((await ask('over1')).body.length, third + 1)
  const again = await ask('over1')
  t.equal(again.statusCode, 200)
  t.match(again.headers['cache-status'], /fwd=miss/, 'not kept: asked again, it is produced again')
  over.done()
})

t.test('FORGE_CACHE_TTL_SECONDS=0 never answers from the cache fresh: every request asks the upstream, max-age=0', async (t) => {
  const { app } = await buildAggregator(t, { env: { FORGE_CACHE_TTL_SECONDS: 0 } })
  const scope = nock(API, { badheaders: ['if-none-match'] })
    .get('/repos/octocat/hello')
    .times(2)
    .reply(200, { stargazers_count: 1, forks_count: 2, private: false }, RESOURCE_HEADERS)
  const first = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(first.headers['cache-control'], 'public, max-age=0')
  scope.done()
})
