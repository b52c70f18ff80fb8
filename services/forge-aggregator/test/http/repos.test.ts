import t from 'tap'
import nock from 'nock'
import { buildAggregator } from '../helpers/build.ts'
import { askedOn401, buildInMode, CREDENTIAL_MODES, DEFAULT_INSTALLATION } from '../helpers/app-upstream.ts'
import { API, PINNED_HEADERS, RESOURCE_HEADERS, fixtures, makeRepo, recordUnexpectedCalls } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const LIST_QUERY = { sort: 'updated', per_page: '100' }

for (const mode of CREDENTIAL_MODES) {
  t.test(`${mode.name}: with repo_name: the stars and forks of that repository of the default user, in one call`, async (t) => {
    const { app, appCalls, sentWith } = await buildInMode(t, mode)
    const unexpected = recordUnexpectedCalls(t)
    const scope = nock(API, { reqheaders: PINNED_HEADERS })
      .get('/repos/octocat/Hello-World')
      .reply(200, { ...fixtures.repository, stargazers_count: 80, forks_count: 9 }, RESOURCE_HEADERS)

    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=Hello-World' })
    t.equal(res.statusCode, 200)
    t.same(res.json(), { stars: 80, forksCount: 9 })
    scope.done()
    t.same(unexpected, [])
    // Not about an account: no lookup, the default installation's token (minted once) or none.
    t.same(await sentWith(), { [mode.defaultToken ? 'app-default' : 'anonymous']: 1 })
    t.same(appCalls, { lookups: [], mints: mode.defaultToken ? [DEFAULT_INSTALLATION] : [] })
  })

  t.test(`${mode.name}: without repo_name: the default user’s repositories, sorted by update, in camelCase, in one call`, async (t) => {
    const { app } = await buildInMode(t, mode, { env: { FORGE_DEFAULT_USER: 'mona' } })
    const unexpected = recordUnexpectedCalls(t)
    const repos = [
      makeRepo('mona', 'recent', { stargazers_count: 3, forks_count: 1, language: 'Go', description: 'new' }),
      makeRepo('mona', 'older', { stargazers_count: 5, forks_count: 0, language: null, description: null }),
    ]
    const scope = nock(API, { reqheaders: PINNED_HEADERS }).get('/users/mona/repos').query(LIST_QUERY).reply(200, repos, RESOURCE_HEADERS)

    const res = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.equal(res.statusCode, 200)
    t.same(res.json(), {
      repos: [
        {
          name: 'recent',
          fullName: 'mona/recent',
          description: 'new',
          stars: 3,
          forksCount: 1,
          language: 'Go',
          url: 'https://github.com/mona/recent',
          updatedAt: repos[0]?.updated_at,
          isPrivate: false,
        },
        {
          name: 'older',
          fullName: 'mona/older',
          description: null,
          stars: 5,
          forksCount: 0,
          language: null,
          url: 'https://github.com/mona/older',
          updatedAt: repos[1]?.updated_at,
          isPrivate: false,
        },
      ],
      totalCount: 2,
    })
    scope.done()
    t.same(unexpected, [])
  })

  t.test(`${mode.name}: a repository that does not exist answers 404 Repository not found`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/nothing-here').reply(404, { message: 'Not Found', status: '404' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=nothing-here' })
    t.equal(res.statusCode, 404)
    t.same(res.json(), { error: 'Repository not found' })
  })

  t.test(`${mode.name}: the list of a user that does not exist answers 404 User not found`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/users/octocat/repos').query(LIST_QUERY).reply(404, { message: 'Not Found', status: '404' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.equal(res.statusCode, 404)
    t.same(res.json(), { error: 'User not found' })
  })

  t.test(`${mode.name}: an upstream failure of one repository answers 500 Failed to fetch repository with details`, async (t) => {
    const { app } = await buildInMode(t, mode)
    // With the default installation's token, the 401 is taken for a refused token: renewed, asked once more.
    nock(API).get('/repos/octocat/broken').times(askedOn401(mode.defaultToken)).reply(401, { message: 'Bad credentials', status: '401' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=broken' })
    t.equal(res.statusCode, 500)
    t.same(res.json(), { error: 'Failed to fetch repository', details: 'Upstream responded 401: Bad credentials' })
  })

  t.test(`${mode.name}: an upstream failure of the list answers 500 Failed to fetch repositories with details`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/users/octocat/repos').query(LIST_QUERY).times(askedOn401(mode.defaultToken)).reply(401, { message: 'Bad credentials', status: '401' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.equal(res.statusCode, 500)
    t.same(res.json(), { error: 'Failed to fetch repositories', details: 'Upstream responded 401: Bad credentials' })
  })

  t.test(`${mode.name}: an upstream rate limit answers 403 on both modes`, async (t) => {
    const limited = { message: 'API rate limit exceeded for 203.0.113.7.' }
    nock(API).get('/repos/octocat/x').reply(403, limited, { 'x-ratelimit-remaining': '0', 'retry-after': '30' })
    nock(API).get('/users/octocat/repos').query(LIST_QUERY).reply(429, limited, { 'retry-after': '5' })
    // Each on an app of its own: after the first, the spent budget would answer the second without asking.
    const one = await (await buildInMode(t, mode)).app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=x' })
    const list = await (await buildInMode(t, mode)).app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.equal(one.statusCode, 403)
    t.same(one.json(), { error: 'API rate limit exceeded or access forbidden' })
    t.equal(one.headers['retry-after'], '30')
    t.equal(list.statusCode, 403)
    t.equal(list.headers['retry-after'], '5')
  })

  t.test(`${mode.name}: a 403 without rate-limit headers answers 403 without Retry-After`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/private-thing').reply(403, { message: 'Resource not accessible by integration' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=private-thing' })
    t.equal(res.statusCode, 403)
    t.equal(res.headers['retry-after'], undefined)
  })

  t.test(`${mode.name}: a renamed repository is followed through its redirect and answers 200`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API, { reqheaders: PINNED_HEADERS })
    scope.get('/repos/octocat/old-name').reply(301, { message: 'Moved Permanently' }, { location: `${API}/repositories/1296269` })
    scope.get('/repositories/1296269').reply(200, { ...fixtures.repository, stargazers_count: 12, forks_count: 3 }, RESOURCE_HEADERS)
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=old-name' })
    t.equal(res.statusCode, 200)
    t.same(res.json(), { stars: 12, forksCount: 3 })
    scope.done()
  })

  t.test(`${mode.name}: more than three redirects in a row answer 500`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    for (let hop = 0; hop < 4; hop++) scope.get(`/hop-${hop}`).reply(307, '', { location: `${API}/hop-${hop + 1}` })
    scope.get('/repos/octocat/loop').reply(301, '', { location: `${API}/hop-0` })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=loop' })
    t.equal(res.statusCode, 500)
    t.match(res.json(), { error: 'Failed to fetch repository', details: /^Upstream responded 307/ })
  })

  t.test(`${mode.name}: repository names differing only in case share one cache entry`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API).get('/repos/octocat/Hello-World').once().reply(200, fixtures.repository, RESOURCE_HEADERS)
    const first = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=Hello-World' })
    const second = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello-world' })
    t.equal(second.statusCode, 200)
    t.equal(second.body, first.body)
    scope.done()
  })
}

t.test('with a token', async (t) => {
  const TOKEN = 'ghp_testtoken0000000000000000000000000000'
  const authorized = { reqheaders: { ...PINNED_HEADERS, authorization: `Bearer ${TOKEN}` } }
  const owner = { ...fixtures.authenticatedUser, login: 'Mona' }
  const privateRepo = { ...fixtures.authenticatedUserRepos[0], name: 'secret', private: true }

  t.test('that belongs to the owner, the list comes from /user/repos and includes private repositories', async (t) => {
    const { app } = await buildAggregator(t, { env: { FORGE_DEFAULT_USER: 'mona', FORGE_TOKEN: TOKEN } })
    const scope = nock(API, authorized)
    scope.get('/user').reply(200, owner)
    scope.get('/user/repos').query({ affiliation: 'owner', ...LIST_QUERY }).reply(200, [privateRepo])
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.equal(res.statusCode, 200)
    t.match(res.json(), { repos: [{ name: 'secret', isPrivate: true }], totalCount: 1 })
    t.equal(res.headers['cache-control'], 'private, max-age=60', 'no shared cache may keep a private repository')
    scope.done()
  })

  t.test('one private repository is answered with Cache-Control: private', async (t) => {
    const { app } = await buildAggregator(t, { env: { FORGE_TOKEN: TOKEN } })
    nock(API, authorized).get('/repos/octocat/secret').reply(200, { ...fixtures.repository, private: true }, RESOURCE_HEADERS)
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=secret' })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['cache-control'], 'private, max-age=60')
  })

  t.test('who owns it is asked once per process', async (t) => {
    const { app } = await buildAggregator(t, { env: { FORGE_DEFAULT_USER: 'mona', FORGE_TOKEN: TOKEN, FORGE_CACHE_TTL_SECONDS: 0 } })
    const unexpected = recordUnexpectedCalls(t)
    const scope = nock(API, authorized)
    scope.get('/user').once().reply(200, owner)
    scope.get('/user/repos').query(true).times(2).reply(200, [privateRepo])
    await app.inject({ method: 'GET', url: '/api/forge/repos' })
    await app.inject({ method: 'GET', url: '/api/forge/repos' })
    scope.done()
    t.same(unexpected, [])
  })

  t.test('that belongs to someone else, the public list is used', async (t) => {
    const { app } = await buildAggregator(t, { env: { FORGE_DEFAULT_USER: 'octocat', FORGE_TOKEN: TOKEN } })
    const scope = nock(API, authorized)
    scope.get('/user').reply(200, owner)
    scope.get('/users/octocat/repos').query(LIST_QUERY).reply(200, [makeRepo('octocat', 'public-one')])
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.match(res.json(), { repos: [{ name: 'public-one', isPrivate: false }] })
    t.equal(res.headers['cache-control'], 'public, max-age=60')
    scope.done()
  })

  t.test('when asking whose it is fails, this request uses the public list and the next one asks again', async (t) => {
    const { app } = await buildAggregator(t, { env: { FORGE_DEFAULT_USER: 'mona', FORGE_TOKEN: TOKEN, FORGE_CACHE_TTL_SECONDS: 0 } })
    const scope = nock(API, authorized)
    scope.get('/user').reply(502, { message: 'Bad Gateway' })
    scope.get('/user').reply(502, { message: 'Bad Gateway' })
    scope.get('/user').reply(502, { message: 'Bad Gateway' })
    scope.get('/users/mona/repos').query(LIST_QUERY).reply(200, [makeRepo('mona', 'public-one')])
    scope.get('/user').reply(200, owner)
    scope.get('/user/repos').query(true).reply(200, [privateRepo])

    const first = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.match(first.json(), { repos: [{ name: 'public-one' }] })
    const second = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.match(second.json(), { repos: [{ name: 'secret', isPrivate: true }] })
    scope.done()
  })
})
