import t from 'tap'
import nock from 'nock'
import { startPrivateRedis } from '@repo/test-support'
import { buildAggregator } from '../helpers/build.ts'
import { sharedRedis } from '../helpers/shared-redis.ts'
import { API, RESOURCE_HEADERS, fixtures } from '../helpers/upstream.ts'

// What a replica reads back from Redis is checked against the stored format, and counted when it fails.
const { inspector, replicas, reachedRedis, namespaceOf } = await sharedRedis(t)

const HELLO = '/api/forge/repos?repo_name=hello'

t.test('a Redis entry that is not JSON or fails its schema is a miss, and counted', async (t) => {
  const [one] = await replicas(t, 1)
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}answer:repo/octocat/garbled`, 'not json', { expiration: { type: 'PX', value: 60_000 } })
  await inspector.set(`${namespace}answer:repo/octocat/shapeless`, JSON.stringify({ body: 1 }), { expiration: { type: 'PX', value: 60_000 } })
  for (const name of ['garbled', 'shapeless']) {
    const scope = nock(API).get(`/repos/octocat/${name}`).reply(200, fixtures.repository, RESOURCE_HEADERS)
    const res = await one!.app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${name}` })
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored', name)
    scope.done()
  }
  t.equal(await one!.metric('forge_shared_entries_rejected_total', { kind: 'answer' }), 2)
  t.equal(await one!.metric('forge_shared_entries_rejected_total', { kind: 'held' }), 0)
})

t.test('an entry read back whole, or a key Redis does not hold, is not counted as rejected; every kind is shown from the start', async (t) => {
  const [one, two] = await replicas(t, 2)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one!.app.inject({ method: 'GET', url: HELLO })
  await reachedRedis('repo/octocat/hello')
  const res = await two!.app.inject({ method: 'GET', url: HELLO })
  t.equal(res.headers['cache-status'], 'forge-aggregator; hit; ttl=60', "the first replica's answer, read from Redis")
  for (const [name, replica] of [['the replica that missed', one!], ['the replica that read it', two!]] as const) {
    for (const kind of ['answer', 'held', 'budget']) t.equal(await replica.metric('forge_shared_entries_rejected_total', { kind }), 0, `${name}: ${kind}`)
  }
})

t.test('a Redis that cannot answer reads as a miss, never as a rejected entry', async (t) => {
  const own = await startPrivateRedis({ durable: false })
  t.teardown(() => own.dispose())
  const replica = await buildAggregator(t, { env: { REDIS_URL: `redis://127.0.0.1:${own.port}` } })
  await own.stop()
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await replica.app.inject({ method: 'GET', url: HELLO })).statusCode, 200)
  for (const kind of ['answer', 'held', 'budget']) t.equal(await replica.metric('forge_shared_entries_rejected_total', { kind }), 0, kind)
})
