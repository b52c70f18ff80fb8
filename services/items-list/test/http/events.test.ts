import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'
import { applyEvents, count, listening, openStream } from '../helpers/event-source.ts'

const { app } = await buildService(t, { env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
const base = await listening(app)

const add = (name: string) => app.inject({ method: 'POST', url: '/items/', payload: { name } })
const list = async () => (await app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>().items

t.test('a stream starts with reset, the list as appends and synced, then every change', async (t) => {
  for (const name of ['pear', 'apple', 'pear']) await add(name)
  const stream = await openStream(`${base}/items/events`)
  t.teardown(() => stream.close())
  t.equal(stream.status, 200)
  t.match(stream.headers['content-type'], /^text\/event-stream/)
  await stream.until((events) => count(events, 'synced') === 1)
  t.same(
    stream.events.map(({ event }) => event),
    ['reset', 'append', 'append', 'append', 'synced'],
  )
  t.same(applyEvents(stream.events), ['pear', 'apple', 'pear'])
  const ats = stream.events.filter(({ event }) => event === 'append').map(({ data }) => (data as { at: string }).at)
  t.same([...ats].sort(), ats, 'positions sort in the list order')
  await add('fig')
  await app.inject({ method: 'DELETE', url: '/items/pear' })
  await stream.until((events) => count(events, 'remove') === 1)
  t.same(stream.events.slice(5).map(({ event }) => event), ['append', 'remove'])
  t.same((stream.events.at(-1)!.data as { at: string[] }).at, [ats[0], ats[2]], 'a remove names the positions the delete removed')
  t.same(applyEvents(stream.events), await list())
  t.ok(stream.events.every(({ id }) => id !== ''), 'every event has an id')
})

t.test('an empty list is reset then synced', async (t) => {
  const stream = await openStream(`${base}/items/events`)
  t.teardown(() => stream.close())
  await stream.until((events) => count(events, 'synced') === 1)
  t.same(stream.events.map(({ event }) => event), ['reset', 'synced'])
})
