import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventually, redisOutages, repeatsAnOutage, startPrivateSentinelGroup } from '@repo/test-support'
import { buildAggregator } from '../helpers/build.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS } from '../helpers/repository-upstream.ts'

// Sentinels need a second of silence to call the primary down, then an election and a promotion.
t.setTimeout(120_000)

const CLIENTS = 4
const REPOS = ['hello-world', 'spoon-knife', 'linguist', 'octocat.github.io']

t.test('with REDIS_SENTINELS, a primary killed under load: every request is answered, and the shared cache follows the new primary', async (t) => {
  const group = await startPrivateSentinelGroup()
  t.teardown(() => group.dispose())
  const upstream = await startLocalUpstream(t, answerRepository('octocat'))
  // No freshness: every request asks Redis for the production lock and stores its answer there.
  const { app, metric, logs } = await buildAggregator(t, {
    env: { FORGE_API_URL: upstream.url, FORGE_CACHE_TTL_SECONDS: 0, REDIS_SENTINELS: group.sentinelList, REDIS_SENTINEL_NAME: group.name },
  })

  const statuses = new Map<number, number>()
  let answered = 0
  let wrongBodies = 0
  let stopping = false
  async function client(id: number): Promise<void> {
    for (let n = 0; !stopping; n++) {
      const res = await app.inject({ url: `/api/forge/repos?repo_name=${REPOS[(id + n) % REPOS.length]}` })
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      if (res.statusCode === 200 && res.body !== JSON.stringify(REPOSITORY_COUNTS)) wrongBodies++
      answered++
    }
  }

  const clients = Array.from({ length: CLIENTS }, (_, id) => client(id))
  t.ok(await eventually(async () => answered >= 40), 'answering before the kill')
  const oldPrimary = await group.primaryPort()
  const killedAt = performance.now()
  await group.primary.stop()
  // Until the store is back on the new primary, and a while after.
  while ((await metric('forge_shared_store_up')) !== 1 || performance.now() - killedAt < 2_000) {
    if (performance.now() - killedAt > 30_000) break
    await sleep(100)
  }
  const backAfterMs = performance.now() - killedAt
  const before = answered
  // Up to 30 s: a production lock taken on the old primary whose release was lost with it stays
  // on the new one until it expires (2 × FORGE_TIMEOUT_MS), and requests for its key wait on it.
  t.ok(await eventually(async () => answered >= before + 40, 600), 'answering after the failover')
  stopping = true
  await Promise.all(clients)

  t.same([...statuses.keys()], [200], `every one of ${answered} requests was answered 200`)
  t.equal(wrongBodies, 0, 'every answer is the repository’s')
  t.not(await group.primaryPort(), oldPrimary, 'a replica was promoted')
  t.ok(backAfterMs < 10_000, `the shared cache answered again ${Math.round(backAfterMs)} ms after the kill`)
  // The production lock too: its subscriber follows the new primary, so replicas share productions again.
  const claim = await app.sharedCache!.lock.claim('after-the-failover')
  t.equal(claim.kind, 'mine', 'the production lock is taken on the new primary')
  if (claim.kind === 'mine') claim.release()
  const outages = redisOutages(logs.lines).get('shared cache') ?? []
  t.ok(outages.includes('down'), 'the outage is logged')
  t.notOk(repeatsAnOutage(outages), `each outage is logged once, its end once: ${outages.join(', ')}`)
  t.equal(outages.at(-1), 'up', 'its end is logged')
})
