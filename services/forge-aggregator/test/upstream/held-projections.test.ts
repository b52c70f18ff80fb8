import t from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, SEARCH_HEADERS, fixtures, makeFollowers, makeRepos, makeUser, mockUser, searchResult } from '../helpers/upstream.ts'
import { buildAggregator } from '../helpers/build.ts'

// What is held for revalidation is what producing the answers reads, with the ETag: never the
// upstream's whole bodies (docs/design.md, "Held projections"). Read back from the shared Redis.
const { inspector, replicas } = await sharedRedis(t)

const TTL_MS = 60_000
const USERS = '/api/forge/users?user_name=mona'

/** The fields each answer and the statistics read, written out: a field dropped from a projection shows here. */
const REPOSITORY_FIELDS = ['description', 'fork', 'forks_count', 'full_name', 'html_url', 'language', 'name', 'private', 'stargazers_count', 'topics', 'updated_at']
const FOLLOWER_FIELDS = ['avatar_url', 'html_url', 'id', 'login', 'type']
const PROFILE_FIELDS = ['avatar_url', 'bio', 'blog', 'company', 'created_at', 'followers', 'following', 'html_url', 'location', 'login', 'name', 'public_repos', 'updated_at']

/** The held entry of upstream `target`, once a replica has written it to Redis. */
async function heldEntry(target: string): Promise<{ etag: string; shape?: string; text: string }> {
  const key = async () => (await inspector.keys(`*held:${target}`))[0]
  if (!(await eventually(async () => (await key()) !== undefined))) throw new Error(`${target} was never held`)
  return JSON.parse((await inspector.get((await key())!))!) as { etag: string; shape?: string; text: string }
}

const fieldsOf = (value: object) => Object.keys(value).sort()

t.test('a held repository page, follower list and profile keep only the fields the answers read, with the ETag', async (t) => {
  const [replica] = await replicas(t, 1)
  const scope = mockUser({ login: 'mona', repoPages: [makeRepos('mona', 3, (index) => ({ language: index === 0 ? null : 'Go' }))], followers: makeFollowers(2) })
  t.equal((await replica!.app.inject({ method: 'GET', url: USERS })).statusCode, 200)
  scope.done()

  const repos = await heldEntry('/users/mona/repos?type=owner&per_page=100&page=1')
  const followers = await heldEntry('/users/mona/followers?per_page=30')
  const profile = await heldEntry('/users/mona')
  for (const entry of [repos, followers, profile]) t.equal(entry.etag, RESOURCE_HEADERS.etag)
  const heldRepos = JSON.parse(repos.text) as object[]
  t.equal(heldRepos.length, 3)
  for (const repo of heldRepos) t.same(fieldsOf(repo), REPOSITORY_FIELDS)
  t.same((JSON.parse(followers.text) as object[]).map(fieldsOf), [FOLLOWER_FIELDS, FOLLOWER_FIELDS])
  t.same(fieldsOf(JSON.parse(profile.text) as object), PROFILE_FIELDS)
  t.equal(repos.shape === undefined || followers.shape === undefined || profile.shape === undefined, false, 'each says what it was projected for')
  t.equal(new Set([repos.shape, followers.shape, profile.shape]).size, 3, 'one shape per schema')
})

t.test('list mode and one repository hold their projections too', async (t) => {
  const [replica] = await replicas(t, 1)
  nock(API).get('/users/octocat/repos').query(true).reply(200, makeRepos('octocat', 2), RESOURCE_HEADERS)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await replica!.app.inject({ method: 'GET', url: '/api/forge/repos' })).statusCode, 200)
  t.equal((await replica!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })).statusCode, 200)
  for (const repo of JSON.parse((await heldEntry('/users/octocat/repos?sort=updated&per_page=100')).text) as object[]) t.same(fieldsOf(repo), REPOSITORY_FIELDS)
  t.same(fieldsOf(JSON.parse((await heldEntry('/repos/octocat/hello')).text) as object), ['forks_count', 'private', 'stargazers_count'])
})

t.test('an answer rebuilt from held projections after 304s is byte for byte the answer made from the whole bodies', async (t) => {
  // Without Redis too: the process's own held entries are projections as well.
  for (const shared of [true, false]) {
    const replica = shared ? (await replicas(t, 1))[0]! : await buildAggregator(t)
    const pages = [makeRepos('mona', 12, (index) => ({ stargazers_count: (index * 7) % 5, fork: index % 4 === 3, topics: index % 2 ? ['x'] : [], description: index % 3 ? null : 'd' }))]
    const whole = mockUser({ login: 'mona', repoPages: pages, followers: makeFollowers(3), issues: 5, prs: 2 })
    const cold = await replica.app.inject({ method: 'GET', url: USERS })
    whole.done()
    if (shared) await heldEntry('/users/mona/followers?per_page=30')
    replica.advanceClock(TTL_MS + 1)

    const revalidated = nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } })
    revalidated.get('/users/mona').reply(304, '', RESOURCE_HEADERS)
    revalidated.get('/users/mona/repos').query(true).reply(304, '', RESOURCE_HEADERS)
    revalidated.get('/users/mona/followers').query(true).reply(304, '', RESOURCE_HEADERS)
    nock(API).get('/search/issues').query({ q: 'author:mona is:issue', per_page: '1' }).reply(200, searchResult(5), SEARCH_HEADERS)
    nock(API).get('/search/issues').query({ q: 'author:mona is:pr', per_page: '1' }).reply(200, searchResult(2), SEARCH_HEADERS)
    const again = await replica.app.inject({ method: 'GET', url: USERS })
    revalidated.done()
    t.equal(again.headers['cache-status'], 'forge-aggregator; fwd=stale; stored', shared ? 'with Redis' : 'in the process')
    t.equal(again.body, cold.body, shared ? 'with Redis: the same bytes' : 'in the process: the same bytes')
    t.equal(again.headers.etag, cold.headers.etag)
    await inspector.flushAll()
  }
})

t.test("a profile's null and empty fields are held and answered as sent; fields beyond those read, nested or long, are not held", async (t) => {
  const [replica] = await replicas(t, 1)
  const profile = makeUser('mona', { bio: null, company: null, blog: '', public_repos: 0 })
  nock(API).get('/users/mona').reply(200, { ...profile, plan: { name: 'pro', space: 1 }, extra: 'x'.repeat(10_000) }, RESOURCE_HEADERS)
  nock(API).get('/users/mona/repos').query(true).reply(200, [], RESOURCE_HEADERS)
  nock(API).get('/users/mona/followers').query(true).reply(200, [], RESOURCE_HEADERS)
  nock(API).get('/search/issues').query(true).times(2).reply(200, searchResult(0), SEARCH_HEADERS)
  const res = await replica!.app.inject({ method: 'GET', url: USERS })
  t.match(res.json(), { user: { login: 'mona', bio: null, company: null, blog: '', public_repos: 0 } })
  const held = await heldEntry('/users/mona')
  t.ok(held.text.length < 1_000, `the profile's extras are not held (${held.text.length} characters)`)
  t.same(fieldsOf(JSON.parse(held.text) as object), PROFILE_FIELDS)
})

t.test('every field an answer shows comes through the projection from the upstream body, cold and revalidated', async (t) => {
  const [replica] = await replicas(t, 1)
  const profile = makeUser('mona', { public_repos: 2, name: 'Mona', bio: 'b', location: 'l', company: 'c', blog: 'https://b.example' })
  const repos = makeRepos('mona', 2, (index) => ({ stargazers_count: 5 - index, forks_count: 2, language: 'Go', description: `d${index}`, topics: ['a', `t${index}`], updated_at: `2026-0${index + 1}-01T00:00:00Z` }))
  const followers = makeFollowers(2)
  const pick = <Body extends object>(body: Body, fields: readonly string[]) => Object.fromEntries(fields.map((field) => [field, body[field as keyof Body]]))
  const expected = {
    user: pick(profile, PROFILE_FIELDS),
    topRepos: repos.map((repo) => pick(repo, REPOSITORY_FIELDS.filter((field) => field !== 'fork' && field !== 'private'))),
    followers: followers.map((follower) => pick(follower, FOLLOWER_FIELDS)),
  }
  const scope = mockUser({ login: 'mona', profile, repoPages: [repos], followers })
  t.match((await replica!.app.inject({ method: 'GET', url: USERS })).json(), expected, 'cold')
  scope.done()
  await heldEntry('/users/mona/followers?per_page=30')
  replica!.advanceClock(TTL_MS + 1)
  const revalidated = nock(API, { reqheaders: { 'if-none-match': RESOURCE_HEADERS.etag } })
  revalidated.get('/users/mona').reply(304, '', RESOURCE_HEADERS)
  revalidated.get('/users/mona/repos').query(true).reply(304, '', RESOURCE_HEADERS)
  revalidated.get('/users/mona/followers').query(true).reply(304, '', RESOURCE_HEADERS)
  nock(API).get('/search/issues').query(true).times(2).reply(200, searchResult(1), SEARCH_HEADERS)
  t.match((await replica!.app.inject({ method: 'GET', url: USERS })).json(), expected, 'revalidated')
  revalidated.done()
})
