import t from 'tap'
import nock from 'nock'
import { untilUpstreamAnswered } from '../helpers/build.ts'
import { appCallsFor, buildInMode, CREDENTIAL_MODES } from '../helpers/app-upstream.ts'
import {
  API,
  heldReply,
  PINNED_HEADERS,
  RESOURCE_HEADERS,
  makeFollowers,
  makeRepo,
  makeRepos,
  makeUser,
  mockSearch,
  mockUser,
  recordUnexpectedCalls,
  searchQuery,
} from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const USER_FIELDS = [
  'login', 'name', 'bio', 'location', 'company', 'blog', 'avatar_url', 'html_url',
  'public_repos', 'followers', 'following', 'created_at', 'updated_at',
]
const STATS_FIELDS = ['totalStars', 'totalForks', 'totalIssues', 'totalPRs', 'publicRepos', 'totalRepos', 'followersCount', 'followingCount']
const FOLLOWER_FIELDS = ['login', 'id', 'avatar_url', 'html_url', 'type']
const TOP_REPO_FIELDS = ['name', 'full_name', 'description', 'html_url', 'stargazers_count', 'forks_count', 'language', 'updated_at', 'topics']

interface Overview {
  user: Record<string, unknown>
  stats: Record<string, number>
  followers: Record<string, unknown>[]
  topRepos: Record<string, unknown>[]
}

for (const mode of CREDENTIAL_MODES) {
  t.test(`${mode.name}: users answers user, stats, followers and topRepos with exactly the listed fields`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = mockUser({ login: 'mona', repoPages: [makeRepos('mona', 2)], followers: makeFollowers(2), issues: 7, prs: 3 })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })

    t.equal(res.statusCode, 200)
    t.match(res.headers['content-type'], /^application\/json/)
    const body = res.json<Overview>()
    t.same(Object.keys(body), ['user', 'stats', 'followers', 'topRepos'])
    t.same(Object.keys(body.user), USER_FIELDS)
    t.same(Object.keys(body.stats), STATS_FIELDS)
    t.same(Object.keys(body.followers[0] ?? {}), FOLLOWER_FIELDS)
    t.same(Object.keys(body.topRepos[0] ?? {}), TOP_REPO_FIELDS)
    const profile = makeUser('mona')
    t.same(body.user, Object.fromEntries(USER_FIELDS.map((field) => [field, profile[field as keyof typeof profile]])), 'as the upstream gave them')
    t.equal(body.stats.totalIssues, 7)
    t.equal(body.stats.totalPRs, 3)
    t.equal(body.stats.followersCount, profile.followers)
    t.equal(body.stats.followingCount, profile.following)
    scope.done()
  })

  t.test(`${mode.name}: without user_name the configured default user is used`, async (t) => {
    const { app } = await buildInMode(t, mode, { env: { FORGE_DEFAULT_USER: 'hubot' } })
    const scope = mockUser({ login: 'hubot' })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users' })
    t.equal(res.statusCode, 200)
    t.equal(res.json<Overview>().user.login, 'hubot')
    scope.done()
  })

  t.test(`${mode.name}: one request makes exactly the five calls, each with the pinned version, Accept and User-Agent`, async (t) => {
    const { app, appCalls, sentWith } = await buildInMode(t, mode)
    const unexpected = recordUnexpectedCalls(t)
    // Every interceptor of mockUser requires PINNED_HEADERS; a call without them matches none.
    const scope = mockUser({ login: 'mona', publicRepos: 3 })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 200)
    scope.done()
    t.same(unexpected, [], 'no other call')
    t.same(await sentWith(), { [mode.accountCredential]: 5 }, 'all five with the account’s credential')
    t.same(appCalls, appCallsFor(mode, ['mona']), 'beside them, the App’s own: one lookup, one mint')
  })

  t.test(`${mode.name}: the five upstream calls are all in flight at once`, async (t) => {
    const { app } = await buildInMode(t, mode)
    // No upstream answer is sent before all five requests have arrived: sequential calls would never finish.
    let arrived = 0
    let releaseAll!: () => void
    const allArrived = new Promise<void>((resolve) => (releaseAll = resolve))
    const barrier = async () => {
      arrived += 1
      if (arrived === 5) releaseAll()
      await allArrived
    }
    const scope = nock(API)
    scope.get('/users/mona').reply(async () => (await barrier(), [200, makeUser('mona', { public_repos: 1 }), RESOURCE_HEADERS]))
    scope.get('/users/mona/repos').query(true).reply(async () => (await barrier(), [200, [makeRepo('mona', 'only')]]))
    scope.get('/users/mona/followers').query(true).reply(async () => (await barrier(), [200, makeFollowers(1)]))
    scope.get('/search/issues').query(true).times(2).reply(async () => (await barrier(), [200, { total_count: 1, incomplete_results: false, items: [] }]))

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 200)
    t.equal(arrived, 5)
    scope.done()
  })

  t.test(`${mode.name}: a user with 250 repositories gets totals over all 250, pages 2 and 3 asked once the profile says they exist`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const repos = makeRepos('mona', 250, (index) => ({ stargazers_count: 1, forks_count: 2, fork: index % 5 === 0 }))
    const scope = mockUser({ login: 'mona', publicRepos: 250, repoPages: [repos.slice(0, 100), repos.slice(100, 200), repos.slice(200)] })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    const { stats } = res.json<Overview>()
    t.equal(stats.publicRepos, 250)
    t.equal(stats.totalRepos, 250)
    t.equal(stats.totalForks, 500, 'forks summed over every repository')
    t.equal(stats.totalStars, 200, 'stars summed over the 200 that are not forks')
    scope.done()
  })

  t.test(`${mode.name}: pages beyond FORGE_MAX_REPO_PAGES are not read, and totalRepos counts what was read`, async (t) => {
    const { app } = await buildInMode(t, mode, { env: { FORGE_MAX_REPO_PAGES: 2 } })
    const repos = makeRepos('mona', 200)
    const scope = mockUser({ login: 'mona', publicRepos: 250, repoPages: [repos.slice(0, 100), repos.slice(100)] })

    const { stats } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(stats.publicRepos, 250)
    t.equal(stats.totalRepos, 200)
    scope.done()
  })

  t.test(`${mode.name}: page 1 of the repositories is asked even when the profile counts none`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = mockUser({ login: 'mona', publicRepos: 0, repoPages: [[]] })
    const { stats, topRepos } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(stats.totalRepos, 0)
    t.same(topRepos, [])
    scope.done()
  })

  t.test(`${mode.name}: forks are left out of totalStars and counted in totalForks`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const repos = [
      makeRepo('mona', 'own', { stargazers_count: 10, forks_count: 1 }),
      makeRepo('mona', 'forked', { stargazers_count: 100, forks_count: 4, fork: true }),
    ]
    mockUser({ login: 'mona', repoPages: [repos] })
    const { stats } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(stats.totalStars, 10)
    t.equal(stats.totalForks, 5)
  })

  t.test(`${mode.name}: only public repositories are counted`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const repos = [
      makeRepo('mona', 'public', { stargazers_count: 10 }),
      makeRepo('mona', 'secret', { stargazers_count: 1000, private: true, visibility: 'private' }),
    ]
    mockUser({ login: 'mona', repoPages: [repos], publicRepos: 1 })
    const { stats, topRepos } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(stats.totalStars, 10)
    t.equal(stats.totalRepos, 1)
    t.same(topRepos.map((repo) => repo.name), ['public'])
  })

  t.test(`${mode.name}: topRepos holds at most 10, by stargazers_count descending, ties by name ascending`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const stars = [5, 50, 7, 50, 1, 9, 50, 3, 8, 2, 6, 4]
    const repos = stars.map((count, index) => makeRepo('mona', `r${String.fromCharCode(108 - index)}`, { stargazers_count: count }))
    mockUser({ login: 'mona', repoPages: [repos] })
    const { topRepos } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(topRepos.length, 10)
    t.same(
      topRepos.map((repo) => [repo.stargazers_count, repo.name]),
      [[50, 'rf'], [50, 'ri'], [50, 'rk'], [9, 'rg'], [8, 'rd'], [7, 'rj'], [6, 'rb'], [5, 'rl'], [4, 'ra'], [3, 're']],
    )
  })

  t.test(`${mode.name}: fields the upstream gives as null are returned as null, key present`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { name: null, bio: null, company: null, location: null, blog: null }))
    scope.get('/users/mona/repos').query(true).reply(200, [makeRepo('mona', 'bare', { description: null, language: null, updated_at: null })])
    scope.get('/users/mona/followers').query(true).reply(200, [])
    mockSearch(scope, 'mona', 'issue', 0)
    mockSearch(scope, 'mona', 'pr', 0)

    const { user, topRepos } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    for (const field of ['name', 'bio', 'company', 'location', 'blog']) t.equal(user[field], null, field)
    t.match(topRepos[0], { description: null, language: null, updated_at: null })
  })

  t.test(`${mode.name}: a repository without topics gets an empty topics list`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const { topics: _ignored, ...withoutTopics } = makeRepo('mona', 'untagged')
    mockUser({ login: 'mona', repoPages: [[withoutTopics]] })
    const { topRepos } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.same(topRepos[0]?.topics, [])
  })

  t.test(`${mode.name}: followers are limited by FORGE_FOLLOWERS_LIMIT in one upstream call`, async (t) => {
    const { app } = await buildInMode(t, mode, { env: { FORGE_FOLLOWERS_LIMIT: 5 } })
    const scope = mockUser({ login: 'mona', followersLimit: 5, followers: makeFollowers(5) })
    const { followers } = (await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).json<Overview>()
    t.equal(followers.length, 5)
    scope.done()
  })

  t.test(`${mode.name}: a failed issue search gives totalIssues 0, X-Forge-Partial and Cache-Control: no-store`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API, { reqheaders: PINNED_HEADERS })
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }), RESOURCE_HEADERS)
    scope.get('/users/mona/repos').query(true).reply(200, [makeRepo('mona', 'one')])
    scope.get('/users/mona/followers').query(true).reply(200, [])
    scope.get('/search/issues').query({ q: searchQuery('mona', 'issue'), per_page: '1' }).reply(403, { message: 'You have exceeded a secondary rate limit.' })
    mockSearch(scope, 'mona', 'pr', 4)

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 200)
    t.equal(res.json<Overview>().stats.totalIssues, 0)
    t.equal(res.json<Overview>().stats.totalPRs, 4)
    t.equal(res.headers['x-forge-partial'], 'totalIssues')
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.headers.etag, undefined)
    scope.done()
  })

  t.test(`${mode.name}: a failed PR search gives totalPRs 0 and X-Forge-Partial: totalPRs`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(200, [makeRepo('mona', 'one')])
    scope.get('/users/mona/followers').query(true).reply(200, [])
    mockSearch(scope, 'mona', 'issue', 9)
    scope.get('/search/issues').query({ q: searchQuery('mona', 'pr'), per_page: '1' }).reply(422, { message: 'Validation Failed' })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.json<Overview>().stats.totalPRs, 0)
    t.equal(res.json<Overview>().stats.totalIssues, 9)
    t.equal(res.headers['x-forge-partial'], 'totalPRs')
  })

  t.test(`${mode.name}: when both searches fail X-Forge-Partial names both`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(200, [makeRepo('mona', 'one')])
    scope.get('/users/mona/followers').query(true).reply(200, [])
    scope.get('/search/issues').query(true).times(2).replyWithError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['x-forge-partial'], 'totalIssues, totalPRs')
    t.match(res.json<Overview>().stats, { totalIssues: 0, totalPRs: 0 })
  })

  t.test(`${mode.name}: a user that does not exist answers 404 User not found`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const notFound = { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/users/users#get-a-user', status: '404' }
    const scope = nock(API)
    scope.get('/users/ghost-user').reply(404, notFound)
    scope.get('/users/ghost-user/repos').query(true).reply(404, notFound)
    scope.get('/users/ghost-user/followers').query(true).reply(404, notFound)
    scope.get('/search/issues').query(true).times(2).reply(422, { message: 'Validation Failed' })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=ghost-user' })
    t.equal(res.statusCode, 404)
    t.same(res.json(), { error: 'User not found' })
    t.equal(res.headers['cache-control'], 'no-store')
  })

  t.test(`${mode.name}: the profile's failure explains the answer even when another call failed first`, async (t) => {
    const { app, logs } = await buildInMode(t, mode)
    const scope = nock(API)
    // The profile's 404 waits until another call's failure has reached the service.
    scope.get('/users/mona').reply(heldReply(untilUpstreamAnswered(logs, 500), 404, { message: 'Not Found' }))
    scope.get('/users/mona/repos').query(true).reply(500, { message: 'Server Error' })
    scope.get('/users/mona/followers').query(true).reply(500, { message: 'Server Error' })
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 404)
    t.same(res.json(), { error: 'User not found' })
  })

  t.test(`${mode.name}: a rate-limited followers call makes the whole answer 403, even when another call failed otherwise`, async (t) => {
    const { app, logs } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(500, { message: 'Server Error' })
    // The rate limit waits until the other call's failure has reached the service.
    scope
      .get('/users/mona/followers')
      .query(true)
      .reply(heldReply(untilUpstreamAnswered(logs, 500), 403, { message: 'API rate limit exceeded' }, { 'retry-after': '12' }))
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })

    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 403)
    t.same(res.json(), { error: 'API rate limit exceeded or access forbidden' })
    t.equal(res.headers['retry-after'], '12')
  })

  t.test(`${mode.name}: a user deleted between calls (profile found, repositories 404) answers 404 User not found`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(404, { message: 'Not Found' })
    scope.get('/users/mona/followers').query(true).reply(500, { message: 'Server Error' })
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 404)
    t.same(res.json(), { error: 'User not found' })
  })
}
