import t from 'tap'
import { buildService } from '../helpers/service.ts'

const { app, storedItems, inspector } = await buildService(t)

t.test('500 concurrent POSTs of distinct names all answer 201 and each name is stored exactly once', async (t) => {
  const names = Array.from({ length: 500 }, (_, index) => `item-${index}`)
  const responses = await Promise.all(names.map((name) => app.inject({ method: 'POST', url: '/items/', payload: { name } })))

  t.same(new Set(responses.map((res) => res.statusCode)), new Set([201]))
  const stored = await storedItems()
  t.equal(stored.length, 500)
  t.same([...stored].sort(), [...names].sort())
})

t.test('20 concurrent DELETEs of one name: exactly one 200, the rest 404, the other names intact', async (t) => {
  await inspector.rPush('items', ['keep-1', 'doomed', 'keep-2', 'doomed', 'keep-3'])
  const responses = await Promise.all(
    Array.from({ length: 20 }, () => app.inject({ method: 'DELETE', url: '/items/doomed' })),
  )

  const statuses = responses.map((res) => res.statusCode)
  t.equal(statuses.filter((status) => status === 200).length, 1)
  t.equal(statuses.filter((status) => status === 404).length, 19)
  t.same(await storedItems(), ['keep-1', 'keep-2', 'keep-3'])
})
