import t from 'tap'
import type { ServerResponse } from 'node:http'
import nock from 'nock'
import { Agent } from 'undici'
import { eventually } from '@repo/test-support'
import type { TestAggregator } from '../helpers/build.ts'
import { isLocked, pingsAnswered, sharedRedis, untilWaitingOnAnotherReplica } from '../helpers/shared-redis.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { answerRepository } from '../helpers/repository-upstream.ts'
import { API, RESOURCE_HEADERS, fixtures, heldReply, mockHeldUser, recordUnexpectedCalls } from '../helpers/upstream.ts'

// The production lock between replicas (test/shared-cache/lock.test.ts has the lock on its own):
// one replica produces an answer while the others wait for its announcement.
const { inspector, replicas, reachedRedis, namespaceOf } = await sharedRedis(t)

const usersUrl = (login: string) => `/api/forge/users?user_name=${login}`
const HELLO = '/api/forge/repos?repo_name=hello'

/**
 * `replica` producing the repository `hello`, its upstream call held until `openUpstream()`:
 * resolves once its production lock is in Redis (`taken`), with the lock's key.
 */
async function producingHello(replica: TestAggregator) {
  const { promise: opened, resolve: openUpstream } = Promise.withResolvers<void>()
  nock(API).get('/repos/octocat/hello').reply(heldReply(opened, 200, fixtures.repository, RESOURCE_HEADERS))
  const answer = replica.app.inject({ method: 'GET', url: HELLO })
  const taken = await isLocked(inspector, 'repo/octocat/hello')
  const [lock] = await inspector.keys('*lock:repo/octocat/hello')
  return { answer, taken, lock: lock!, openUpstream }
}

t.test('200 concurrent requests for one cold user over 3 replicas cost the five calls of one', async (t) => {
  const apps = await replicas(t, 3)
  const unexpected = recordUnexpectedCalls(t)
  // The production is held until another replica is seen waiting on it.
  const scope = mockHeldUser('mona', untilWaitingOnAnotherReplica(inspector, await pingsAnswered(inspector)))
  const answers = await Promise.all(
    Array.from({ length: 200 }, (_, index) => apps[index % 3]!.app.inject({ method: 'GET', url: usersUrl('mona') })),
  )
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]))
  t.equal(new Set(answers.map((res) => res.body)).size, 1, 'every caller got the same answer')
  scope.done()
  t.same(unexpected, [], 'five calls, no more')
  const statuses = new Set(answers.map((res) => res.headers['cache-status']))
  t.ok(statuses.has('forge-aggregator; fwd=miss; collapsed'), 'the other replicas waited on the one production')
})

t.test('a replica whose production lock is held by a dead replica produces the answer itself after FORGE_TIMEOUT_MS', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 300 } })
  // What a replica that died mid-production leaves behind: a lock with an expiry, and no answer.
  const namespace = await namespaceOf(one!, 'probe')
  await inspector.set(`${namespace}lock:repo/octocat/hello`, 'dead-replica', { expiration: { type: 'PX', value: 60_000 } })
  await inspector.del(`${namespace}answer:repo/octocat/hello`)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  const started = Date.now()
  const res = await one!.app.inject({ method: 'GET', url: HELLO })
  const waited = Date.now() - started
  t.equal(res.statusCode, 200)
  t.ok(waited >= 250 && waited < 1_500, `waited ${waited} ms, bounded by FORGE_TIMEOUT_MS`)
})

t.test('the production lock is set with an expiry: a replica that dies holding it stops nobody for long', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  const { answer, taken, lock, openUpstream } = await producingHello(one!)
  t.ok(taken, 'the lock is taken')
  const pttl = await inspector.pTTL(lock)
  openUpstream()
  t.ok(pttl > 0 && pttl <= 10_000, `PTTL ${pttl} ms: set, and no longer than twice FORGE_TIMEOUT_MS`)
  t.equal((await answer).statusCode, 200)
})

t.test('a lock is released only by the replica holding it: a lock another replica took since stays', async (t) => {
  const [one] = await replicas(t, 1, { env: { FORGE_TIMEOUT_MS: 5_000 } })
  const { answer, taken, lock, openUpstream } = await producingHello(one!)
  t.ok(taken)
  // What happens when the lock expired mid-production and another replica took it.
  await inspector.set(lock, 'another-replica', { expiration: { type: 'PX', value: 60_000 } })
  openUpstream()
  t.equal((await answer).statusCode, 200)
  await reachedRedis('repo/octocat/hello')
  t.equal(await inspector.get(lock), 'another-replica', 'the other replica’s lock is left alone')
})

t.test('the replica holding a lock releases it when its production ends', async (t) => {
  const [one] = await replicas(t, 1)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await one!.app.inject({ method: 'GET', url: HELLO })).statusCode, 200)
  t.ok(await eventually(async () => (await inspector.keys('*lock:*')).length === 0), 'no lock left behind')
})

t.test('a released lock is announced: a request waiting on another replica is answered within a second of the producer', async (t) => {
  const [one, two] = await replicas(t, 2, { env: { FORGE_TIMEOUT_MS: 10_000 } })
  const unexpected = recordUnexpectedCalls(t)
  // The production is held until the second replica is seen waiting on it.
  const { promise: secondWaits, resolve: openUpstream } = Promise.withResolvers<void>()
  nock(API).get('/repos/octocat/hello').reply(heldReply(secondWaits, 200, fixtures.repository, RESOURCE_HEADERS))
  const produced = one!.app.inject({ method: 'GET', url: HELLO }).then((res) => ({ res, at: Date.now() }))
  t.ok(await isLocked(inspector, 'repo/octocat/hello'), 'one holds the lock')
  const pings = await pingsAnswered(inspector)
  const waited = two!.app.inject({ method: 'GET', url: HELLO }).then((res) => ({ res, at: Date.now() }))
  await untilWaitingOnAnotherReplica(inspector, pings)
  openUpstream()
  const [producer, waiter] = await Promise.all([produced, waited])
  t.equal(producer.res.headers['cache-status'], 'forge-aggregator; fwd=miss; stored')
  t.equal(waiter.res.headers['cache-status'], 'forge-aggregator; fwd=miss; collapsed')
  t.equal(waiter.res.body, producer.res.body)
  t.ok(waiter.at - producer.at < 1_000, `answered ${waiter.at - producer.at} ms after the producer, not after FORGE_TIMEOUT_MS`)
  t.same(unexpected, [], 'one upstream call for both')
})

t.test('a replica that stops mid-production releases and announces its lock: a request waiting on it elsewhere goes on at once', async (t) => {
  // The first upstream call (the stopping replica's) is never answered; later ones are at once.
  const held: ServerResponse[] = []
  const upstream = await startLocalUpstream(t, (request, response, index) => {
    if (index === 0) held.push(response)
    else answerRepository('octocat')(request, response)
  })
  // The stopping replica's dispatcher is the test's: closing the app does not wait for the call that hangs.
  const dispatcher = new Agent()
  t.teardown(() => dispatcher.destroy())
  const env = { FORGE_API_URL: upstream.url, FORGE_TIMEOUT_MS: 10_000 }
  const [stopping] = await replicas(t, 1, { env, dispatcher })
  const [other] = await replicas(t, 1, { env })
  const abandoned = stopping!.app.inject({ method: 'GET', url: HELLO })
  t.ok(await eventually(async () => held.length === 1), 'the stopping replica holds the lock and waits on the upstream')

  const pings = await pingsAnswered(inspector)
  let answered = false
  const waited = other!.app.inject({ method: 'GET', url: HELLO }).then((res) => ((answered = true), { res, at: Date.now() }))
  await untilWaitingOnAnotherReplica(inspector, pings)
  t.notOk(answered, 'the other replica waits on that production')
  t.equal(upstream.requests.length, 1, 'rather than produce the answer alone')
  const closedAt = Date.now()
  await stopping!.app.close()
  const { res, at } = await waited
  t.equal(res.statusCode, 200)
  t.ok(at - closedAt < 1_000, `answered ${at - closedAt} ms after the stop, not after FORGE_TIMEOUT_MS`)
  t.equal(upstream.requests.length, 2, 'by a production of its own')
  t.ok(stopping!.logs.lines.some((line) => line.msg === 'production locks released at shutdown' && line.locks === 1))
  held[0]!.destroy()
  await abandoned
  t.same(await inspector.keys('*lock:*'), [], 'no lock left behind, the late end of the abandoned production included')
})
