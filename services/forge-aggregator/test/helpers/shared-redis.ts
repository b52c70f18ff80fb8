import type { Test } from 'tap'
import nock from 'nock'
import { createClient } from 'redis'
import { eventually, LENIENT_REDIS_DEADLINE_MS, startPrivateRedis } from '@repo/test-support'
import { buildAggregator, testClock, type BuildOptions, type TestAggregator, type TestEnv } from './build.ts'
import { API, fixtures, RESOURCE_HEADERS } from './upstream.ts'

/** What these helpers ask of a Redis client of the test's own. */
type Inspector = Pick<ReturnType<typeof createClient>, 'info' | 'keys'>

/** How many PINGs Redis has answered: only a replica waiting on another's production sends them, one per probe interval. */
export async function pingsAnswered(inspector: Inspector): Promise<number> {
  return Number(/^cmdstat_ping:calls=(\d+)/m.exec(await inspector.info('commandstats'))?.[1] ?? 0)
}

/** Resolves once a request has been waiting on another replica's production for a probe interval: its first PING. */
export async function untilWaitingOnAnotherReplica(inspector: Inspector, pingsBefore: number): Promise<void> {
  if (!(await eventually(async () => (await pingsAnswered(inspector)) > pingsBefore))) throw new Error('no request waits on another replica')
}

/** Whether a replica holds the production lock of `key`, or takes it within about 5 s. */
export function isLocked(inspector: Inspector, key: string): Promise<boolean> {
  return eventually(async () => (await inspector.keys(`*lock:${key}`)).length === 1)
}

/** Whether the replica's Redis answers, as its `/metrics` says. */
export async function sharedAvailable(replica: TestAggregator): Promise<boolean> {
  return (await replica.metric('forge_shared_store_up')) === 1
}

/**
 * The private Redis of one test file, which the replicas its tests build share, and a client of
 * the test's own to look into it; emptied (and nock's interceptors with it) after every test.
 * The replicas wait `LENIENT_REDIS_DEADLINE_MS` on that Redis unless `env` (theirs, under each
 * test's own) says otherwise: what is shared is these files' subject, not how long Redis takes,
 * and a replica that set a slow Redis aside would call the upstream itself.
 */
export async function sharedRedis(t: Test, env: TestEnv = { REDIS_DEADLINE_MS: LENIENT_REDIS_DEADLINE_MS }) {
  // A cache needs no durability: without fsync on every write, a loaded machine does not slow it down.
  const redis = await startPrivateRedis({ durable: false })
  const url = `redis://127.0.0.1:${redis.port}`
  const inspector = createClient({ url })
  // The tests stop this Redis on purpose; the inspector only reconnects.
  inspector.on('error', () => {})
  await inspector.connect()
  t.teardown(async () => {
    await inspector.close()
    await redis.dispose()
  })
  t.afterEach(async () => {
    nock.cleanAll()
    await inspector.flushAll()
  })

  /** Waits until the answer at `key` has reached Redis: replicas write it without waiting. */
  async function reachedRedis(key: string): Promise<void> {
    if (!(await eventually(async () => (await inspector.keys(`*answer:${key}`)).length === 1))) throw new Error(`${key} never reached Redis`)
  }

  return {
    redis,
    url,
    inspector,
    reachedRedis,
    /** `count` replicas sharing this Redis and one clock. */
    replicas: (t: Test, count: number, options: BuildOptions = {}): Promise<TestAggregator[]> => {
      const clock = options.clock ?? testClock()
      return Promise.all(Array.from({ length: count }, () => buildAggregator(t, { clock, ...options, env: { REDIS_URL: url, ...env, ...options.env } })))
    },
    /** The key namespace of `replica`, read from the answer it stores for the repository `repo`. */
    namespaceOf: async (replica: TestAggregator, repo: string): Promise<string> => {
      nock(API).get(`/repos/octocat/${repo}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
      await replica.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${repo}` })
      await reachedRedis(`repo/octocat/${repo}`)
      const [key] = await inspector.keys('*answer:*')
      return key!.slice(0, key!.indexOf('answer:'))
    },
  }
}
