import t from 'tap'
import nock from 'nock'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { eventually } from '@repo/test-support'
import { upstreamBodies } from '../../src/forge/bodies.ts'
import { projectionOf } from '../../src/upstream/projection.ts'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, SEARCH_HEADERS, fixtures, makeFollowers, makeRepos, makeUser, mockUser, searchResult } from '../helpers/upstream.ts'

// During a rollout, replicas holding whole bodies (the version before projections) and replicas
// holding projections share one namespace: an entry written by either is read rightly by both, or
// is a miss (docs/design.md, "Rollouts and stored entries").
const { inspector, replicas, namespaceOf } = await sharedRedis(t)

const USERS = '/api/forge/users?user_name=mona'
const HELLO = '/api/forge/repos?repo_name=hello'
const OLD_ETAG = '"written-by-the-version-before"'
const HOUR_MS = 60 * 60 * 1000

/** The entry the version before projections held, as it wrote it: the upstream's whole body. */
const wholeBody = (body: unknown) => JSON.stringify({ etag: OLD_ETAG, text: JSON.stringify(body) })

/** Writes `value` as the held entry of upstream `target` in the namespace replicas of this file use. */
async function holdInRedis(namespace: string, target: string, value: string): Promise<void> {
  await inspector.set(`${namespace}held:${target}`, value, { expiration: { type: 'PX', value: HOUR_MS } })
}

async function readHeld(target: string): Promise<{ etag: string; shape?: string; text: string } | undefined> {
  const [key] = await inspector.keys(`*held:${target}`)
  const value = key === undefined ? null : await inspector.get(key)
  return value === null ? undefined : (JSON.parse(value) as { etag: string; shape?: string; text: string })
}

t.test('whole bodies held by the version before are revalidated with their ETags, and their 304s answer byte for byte as those bodies did', async (t) => {
  const [producer, reader] = await replicas(t, 2)
  const namespace = await namespaceOf(producer!, 'probe')
  const profile = makeUser('mona', { public_repos: 4 })
  const repos = makeRepos('mona', 4, (index) => ({ stargazers_count: index * 3, language: index % 2 ? 'Go' : null }))
  const followers = makeFollowers(3)
  // The answer made from the whole bodies, by a 200 of each.
  const whole = mockUser({ login: 'mona', profile, repoPages: [repos], followers, issues: 4, prs: 1 })
  const expected = await producer!.app.inject({ method: 'GET', url: USERS })
  whole.done()
  await inspector.flushAll()

  await holdInRedis(namespace, '/users/mona', wholeBody(profile))
  await holdInRedis(namespace, '/users/mona/repos?type=owner&per_page=100&page=1', wholeBody(repos))
  await holdInRedis(namespace, '/users/mona/followers?per_page=30', wholeBody(followers))
  const revalidated = nock(API, { reqheaders: { 'if-none-match': OLD_ETAG } })
  revalidated.get('/users/mona').reply(304, '', RESOURCE_HEADERS)
  revalidated.get('/users/mona/repos').query(true).reply(304, '', RESOURCE_HEADERS)
  revalidated.get('/users/mona/followers').query(true).reply(304, '', RESOURCE_HEADERS)
  nock(API).get('/search/issues').query({ q: 'author:mona is:issue', per_page: '1' }).reply(200, searchResult(4), SEARCH_HEADERS)
  nock(API).get('/search/issues').query({ q: 'author:mona is:pr', per_page: '1' }).reply(200, searchResult(1), SEARCH_HEADERS)
  const res = await reader!.app.inject({ method: 'GET', url: USERS })
  revalidated.done()
  t.equal(res.statusCode, 200)
  t.equal(res.body, expected.body, 'the same bytes')

  // Held again from the 304 on, as a projection under the same ETag.
  t.ok(await eventually(async () => (await readHeld('/users/mona'))?.shape !== undefined), 'the profile is held as a projection')
  const held = (await readHeld('/users/mona'))!
  t.equal(held.etag, OLD_ETAG)
  t.equal(held.shape, projectionOf(upstreamBodies.user).shape)
  t.notOk('events_url' in (JSON.parse(held.text) as object), 'fields no answer reads are gone')
})

t.test('an entry projected for another schema is a miss: asked without If-None-Match, and replaced by the 200', async (t) => {
  const [replica] = await replicas(t, 1)
  const namespace = await namespaceOf(replica!, 'probe')
  await inspector.flushAll()
  // A version reading fewer fields: its projection would pass this version's check, and be wrong.
  const fewer = { stargazers_count: 1, forks_count: 1, private: false }
  await holdInRedis(namespace, '/repos/octocat/hello', JSON.stringify({ etag: OLD_ETAG, shape: 'another-schema', text: JSON.stringify(fewer) }))
  const unconditional = nock(API, { badheaders: ['if-none-match'] }).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 80 }, RESOURCE_HEADERS)
  const res = await replica!.app.inject({ method: 'GET', url: HELLO })
  unconditional.done()
  t.same(res.json(), { stars: 80, forksCount: fixtures.repository.forks_count })
  t.ok(await eventually(async () => (await readHeld('/repos/octocat/hello'))?.etag === RESOURCE_HEADERS.etag), 'the 200 replaced it')
})

t.test('an unreadable held entry is a miss, never an error: asked without If-None-Match, answered 200', async (t) => {
  const [replica] = await replicas(t, 1)
  const namespace = await namespaceOf(replica!, 'probe')
  const shape = projectionOf(upstreamBodies.repository).shape
  const unreadable = {
    'not JSON': 'not json',
    'not a held entry': JSON.stringify({ etag: OLD_ETAG }),
    'a text that is not JSON': JSON.stringify({ etag: OLD_ETAG, text: '{"stargazers_count":' }),
    'a whole body that fails the check': JSON.stringify({ etag: OLD_ETAG, text: JSON.stringify({ stargazers_count: 'many' }) }),
    'a projection of this schema that fails the check': JSON.stringify({ etag: OLD_ETAG, shape, text: JSON.stringify({ stargazers_count: 1 }) }),
  }
  for (const [index, [name, value]] of Object.entries(unreadable).entries()) {
    // A repository of its own each: the answer of the one before is fresh in the replica's memory.
    const repo = `hello-${index}`
    await holdInRedis(namespace, `/repos/octocat/${repo}`, value)
    const unconditional = nock(API, { badheaders: ['if-none-match'] }).get(`/repos/octocat/${repo}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
    const res = await replica!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${repo}` })
    t.equal(res.statusCode, 200, name)
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored', name)
    unconditional.done()
  }
})

t.test('an entry this version holds reads, as the version before read held entries, as a body that passes its check', async (t) => {
  const [replica] = await replicas(t, 1)
  const scope = mockUser({ login: 'mona', repoPages: [makeRepos('mona', 2)], followers: makeFollowers(2) })
  await replica!.app.inject({ method: 'GET', url: USERS })
  scope.done()
  // The held entry's schema before projections, written out as it was: extra fields allowed.
  const before = TypeCompiler.Compile(Type.Object({ etag: Type.String({ minLength: 1 }), text: Type.String() }))
  // The version before read the same fields with the same checks (src/forge/bodies.ts).
  for (const [target, check] of [
    ['/users/mona', upstreamBodies.user],
    ['/users/mona/repos?type=owner&per_page=100&page=1', upstreamBodies.repos],
    ['/users/mona/followers?per_page=30', upstreamBodies.followers],
  ] as const) {
    t.ok(await eventually(async () => (await readHeld(target)) !== undefined), `${target} is held`)
    const entry = (await readHeld(target))!
    t.ok(before.Check(entry), `${target}: a held entry to the version before`)
    t.ok(check.Check(JSON.parse(entry.text)), `${target}: its text passes that version's check`)
  }
})
