import t, { type Test } from 'tap'
import nock from 'nock'
import { eventually } from '@repo/test-support'
import { pingsAnswered, sharedAvailable, sharedRedis, untilWaitingOnAnotherReplica } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, fixtures, recordUnexpectedCalls } from '../helpers/upstream.ts'

// Redis stopped, hung or never there: every request is still answered, from the upstream alone.
// How soon a request is answered when Redis hangs is what these tests check: production's deadline,
// the default (no REDIS_DEADLINE_MS of the tests' own).
const { redis, inspector, replicas, reachedRedis, namespaceOf } = await sharedRedis(t, {})

const HELLO = '/api/forge/repos?repo_name=hello'

t.test('Redis killed mid-test: requests are answered from the upstream, the outage is logged once, and sharing resumes after a restart', async (t) => {
  const [one, two] = await replicas(t, 2)
  await redis.stop()
  nock(API).get(/\/repos\/octocat\/r\d/).times(3).reply(200, fixtures.repository, RESOURCE_HEADERS)
  for (const name of ['r1', 'r2', 'r3']) {
    const started = Date.now()
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.statusCode, 200)
    t.ok(Date.now() - started < 1_000, 'within a second')
  }
  const outages = one!.logs.lines.filter((line) => line.msg === 'Redis unavailable; reconnecting in the background')
  t.equal(outages.length, 1, 'logged once')

  await redis.start()
  t.ok(await eventually(async () => (await sharedAvailable(one!)) && (await sharedAvailable(two!))), 'reconnected by itself')
  nock(API).get('/repos/octocat/after').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  await reachedRedis('repo/octocat/after')
  const unexpected = recordUnexpectedCalls(t)
  const shared = await two!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=after' })
  t.equal(shared.headers['cache-status'], 'forge-aggregator; hit; ttl=60')
  t.same(unexpected, [])
})

t.test('a request waiting on another replica’s production is let go at once when Redis goes away', async (t) => {
  const { one, answer } = await waitingOnADeadReplica(t)
  const stopped = Date.now()
  await redis.stop()
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - stopped < 2_000, `answered ${Date.now() - stopped} ms after Redis went away, not after FORGE_TIMEOUT_MS`)
  await redis.start()
  t.ok(await eventually(() => sharedAvailable(one)))
})

t.test('a production lock Redis does not grant in time is not waited for: the request is answered alone', async (t) => {
  const [one] = await replicas(t, 1)
  // Reads are answered, writes (the lock) are held back: a Redis that hangs between two commands.
  await inspector.sendCommand(['CLIENT', 'PAUSE', '1500', 'WRITE'])
  t.teardown(() => inspector.sendCommand(['CLIENT', 'UNPAUSE']))
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
})

t.test('a replica whose Redis never answers starts, answers from the upstream alone, says so on /metrics, and closes at once', async (t) => {
  // The helper waits for the shared cache, which never comes here: built as the helper builds it.
  const { loadConfig } = await import('@repo/config')
  const { createLogger } = await import('@repo/service-kit')
  const { buildApp } = await import('../../src/app.ts')
  const { ForgeAggregatorConfig } = await import('../../src/config.ts')
  const app = await buildApp(loadConfig(ForgeAggregatorConfig, { FORGE_API_URL: API, REDIS_URL: 'redis://127.0.0.1:1' }), { logger: createLogger('silent', process.stdout) })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const res = await app.inject({ method: 'GET', url: HELLO })
  t.equal(res.statusCode, 200)
  t.match((await app.inject({ url: '/metrics' })).body, /^forge_shared_store_up 0$/m)
  const closing = Date.now()
  await app.close()
  t.ok(Date.now() - closing < 1_000)
})

t.test('a request waiting on another replica’s production is let go within about a second when Redis hangs', async (t) => {
  const { one, answer } = await waitingOnADeadReplica(t)
  const paused = Date.now()
  redis.pause()
  t.teardown(() => redis.resume())
  const res = await answer
  t.equal(res.statusCode, 200)
  t.ok(Date.now() - paused < 1_500, `answered ${Date.now() - paused} ms after Redis hung, not after FORGE_TIMEOUT_MS`)
  redis.resume()
  t.ok(await eventually(() => sharedAvailable(one)))
})

t.test('REDIS_DEADLINE_MS is the shared cache’s deadline: a hung Redis is given up on past it, and the outage line says after how long', async (t) => {
  const [one] = await replicas(t, 1, { env: { REDIS_DEADLINE_MS: '1200' } })
  redis.pause()
  t.teardown(() => redis.resume())
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await one!.app.inject({ method: 'GET', url: HELLO })).statusCode, 200, 'answered from the upstream')
  const outage = one!.logs.lines.find((line) => line.msg === 'Redis unavailable; reconnecting in the background')
  t.match(outage, { err: { message: 'Redis did not answer within 1200 ms' } })
  redis.resume()
  t.ok(await eventually(() => sharedAvailable(one!)))
})

t.test('Redis paused (hung): requests are answered within about a second, and sharing resumes when it answers again', async (t) => {
  const [one, spare] = await replicas(t, 2)
  redis.pause()
  t.teardown(() => redis.resume())
  nock(API).get(/\/repos\/octocat\/h\d/).times(3).reply(200, fixtures.repository, RESOURCE_HEADERS)
  for (const name of ['h1', 'h2', 'h3']) {
    const started = Date.now()
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.statusCode, 200)
    t.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`)
  }
  t.equal(one!.logs.lines.filter((line) => line.msg === 'Redis unavailable; reconnecting in the background').length, 1, 'logged once')
  // A read still waiting on the hung server is what makes closing wait.
  nock(API).get('/repos/octocat/spare').reply(200, fixtures.repository, RESOURCE_HEADERS)
  void spare!.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=spare' })
  const closing = Date.now()
  await spare!.app.close()
  t.ok(Date.now() - closing < 1_500, `a replica stopping while Redis hangs does not hang with it (${Date.now() - closing} ms)`)
  redis.resume()
  t.ok(await eventually(() => sharedAvailable(one!)), 'answers are shared again')
  t.ok(one!.logs.lines.some((line) => line.msg === 'Redis connection ready'))
})

/** A replica's request for hello, seen waiting on a production that another replica, gone, holds the lock of. */
async function waitingOnADeadReplica(t: Test) {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const pings = await pingsAnswered(inspector)
  const answer = one!.app.inject({ method: 'GET', url: HELLO })
  await untilWaitingOnAnotherReplica(inspector, pings)
  return { one: one!, answer }
}
