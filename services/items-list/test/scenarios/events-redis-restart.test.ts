import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'
import { applyEvents, count, listening, openStream } from '../helpers/event-source.ts'

// A Redis that comes back with less than it had (here: without persistence, nothing) lost events
// a stream had seen: the stream's copy would hold names the list no longer has. The replica's
// reader sees the stream's last id fall behind its own, and every open stream starts again.

t.test('a Redis restart that lost events the streams had seen sends them reset, a snapshot and synced', async (t) => {
  const { app, redis, untilReady } = await buildService(t, { env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
  const base = await listening(app)
  const add = (name: string) => app.inject({ method: 'POST', url: '/items/', payload: { name } })
  for (const name of ['a', 'b']) await add(name)
  const watcher = await openStream(`${base}/items/events`)
  t.teardown(() => watcher.close())
  await watcher.until((events) => count(events, 'synced') === 1)
  await add('c')
  await watcher.until((events) => events.length === 5)

  await redis.stop('SIGKILL')
  await redis.start()
  await untilReady()
  await watcher.until((events) => count(events, 'synced') === 2, 20_000)
  t.same(applyEvents(watcher.events), [], 'the copy is the list Redis came back with')
  t.equal((await app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>().items.length, 0)
  await add('d')
  await watcher.until((events) => applyEvents(events).join() === 'd')
  t.same(applyEvents(watcher.events), ['d'])
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /^items_events_snapshots_total\{reason="failover"\} 1$/m)
})

t.test('with Redis away, a first stream is refused 503, and a stream of a replica already watching ends at once', async (t) => {
  const { app, redis, untilReady } = await buildService(t, { env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
  const base = await listening(app)
  await redis.stop('SIGKILL')
  const refused = await app.inject({ method: 'GET', url: '/items/events' })
  t.equal(refused.statusCode, 503)
  t.match(refused.json(), { detail: 'Item store unavailable' })
  await redis.start()
  await untilReady()
  const watcher = await openStream(`${base}/items/events`)
  await watcher.until((events) => count(events, 'synced') === 1)
  watcher.close()
  await redis.stop('SIGKILL')
  // The reader is running: the stream opens, and its first read fails; the client tries again.
  const cut = await openStream(`${base}/items/events`)
  t.equal(cut.status, 200)
  await cut.ended
  t.same(cut.events, [])
  await redis.start()
})
