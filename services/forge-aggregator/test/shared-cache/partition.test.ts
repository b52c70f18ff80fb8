import t from 'tap'
import { createSecretKey, randomBytes } from 'node:crypto'
import nock from 'nock'
import { namespaceFor } from '../../src/shared-cache/plugin.ts'
import { callerOf, type UpstreamCredentials } from '../../src/credentials/settings.ts'
import { testClock, type TestEnv } from '../helpers/build.ts'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, fixtures } from '../helpers/upstream.ts'

// Deployments that must not share answers never do, though they share one Redis: each has its own key namespace.
const { inspector, replicas, reachedRedis, namespaceOf } = await sharedRedis(t)

const HELLO = '/api/forge/repos?repo_name=hello'

t.test('deployments with different tokens sharing one Redis never see each other’s answers; the token is never written', async (t) => {
  const TOKEN = 'ghp_sharedtesttoken00000000000000000000000'
  const clock = testClock()
  const [anonymous] = await replicas(t, 1, { clock })
  const [authorized] = await replicas(t, 1, { clock, env: { FORGE_TOKEN: TOKEN } })
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 1 }, RESOURCE_HEADERS)
  nock(API).get('/repos/octocat/hello').reply(200, { ...fixtures.repository, stargazers_count: 2 }, RESOURCE_HEADERS)
  const one = await anonymous!.app.inject({ method: 'GET', url: HELLO })
  const two = await authorized!.app.inject({ method: 'GET', url: HELLO })
  t.same(one.json(), { stars: 1, forksCount: fixtures.repository.forks_count })
  t.same(two.json(), { stars: 2, forksCount: fixtures.repository.forks_count }, 'asked the upstream with its own token')

  const keys = await inspector.keys('*')
  t.equal(new Set(keys.map((key) => key.split(':').slice(0, 3).join(':'))).size, 2, 'two partitions')
  for (const key of keys) {
    t.notMatch(key, TOKEN)
    t.notMatch((await inspector.get(key)) ?? '', TOKEN, `${key} holds no token`)
    t.not(await inspector.pTTL(key), -1, `${key} expires`)
  }
})

t.test('the cache partition changes with FORGE_API_URL, FORGE_FOLLOWERS_LIMIT, FORGE_MAX_REPO_PAGES and the token', async (t) => {
  const GHE = 'https://ghe.example.com/api/v3'
  const variants: [string, TestEnv, string][] = [
    ['FORGE_API_URL', { FORGE_API_URL: GHE }, 'https://ghe.example.com'],
    ['FORGE_FOLLOWERS_LIMIT', { FORGE_FOLLOWERS_LIMIT: 5 }, API],
    ['FORGE_MAX_REPO_PAGES', { FORGE_MAX_REPO_PAGES: 2 }, API],
    ['FORGE_TOKEN', { FORGE_TOKEN: 'ghp_partitiontesttoken00000000000000000000' }, API],
  ]
  for (const [name, env, origin] of variants) {
    await inspector.flushAll()
    const clock = testClock()
    const [base] = await replicas(t, 1, { clock })
    const [other] = await replicas(t, 1, { clock, env })
    nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
    await base!.app.inject({ method: 'GET', url: HELLO })
    await reachedRedis('repo/octocat/hello')
    const path = origin === API ? '/repos/octocat/hello' : '/api/v3/repos/octocat/hello'
    const own = nock(origin).get(path).reply(200, { ...fixtures.repository, stargazers_count: 7 }, RESOURCE_HEADERS)
    const res = await other!.app.inject({ method: 'GET', url: HELLO })
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored', `${name}: not a hit on the other deployment’s answer`)
    t.equal(res.json<{ stars: number }>().stars, 7, `${name}: its own answer`)
    own.done()
  }
})

t.test("a GitHub App's partition is its installation: another installation or App is another partition, a token never shares one", async (t) => {
  const settings = { FORGE_API_URL: API, FORGE_FOLLOWERS_LIMIT: 30, FORGE_MAX_REPO_PAGES: 10 }
  const app = (appId: string, installationId: string): UpstreamCredentials => ({ kind: 'app', appId, installationId, privateKey: createSecretKey(randomBytes(32)) })
  const partitionOf = (credentials: UpstreamCredentials) => namespaceFor(settings, callerOf(credentials))
  t.equal(partitionOf(app('1', '2')), partitionOf(app('1', '2')), 'one installation, whatever its key and tokens: one partition')
  const partitions = [
    partitionOf(app('1', '2')),
    partitionOf(app('1', '3')),
    partitionOf(app('4', '2')),
    partitionOf({ kind: 'token', token: '1:2' }),
    partitionOf({ kind: 'token', token: 'ghp_another' }),
    partitionOf({ kind: 'anonymous' }),
  ]
  t.equal(new Set(partitions).size, partitions.length, 'six partitions')
})

t.test('the key namespace carries the stored format’s version', async (t) => {
  const [one] = await replicas(t, 1)
  const namespace = await namespaceOf(one!, 'probe')
  t.match(namespace, /^forge:v2:[\w-]{16}:$/)
})
