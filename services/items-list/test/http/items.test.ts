import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

// The HTTP contract is the subject, not time: at load 12-17 this file's Redis missed production's
// 500 ms and the first append answered 503.
const { app, storedItems, inspector } = await buildService(t, { env: { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })

async function add(name: string, url = '/items/') {
  return app.inject({ method: 'POST', url, payload: { name } })
}

t.test('GET / answers Hello World', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { message: 'Hello World' })
})

t.test('POST /items/ appends the name and answers 201 Item added successfully', async (t) => {
  const res = await add('apple')
  t.equal(res.statusCode, 201)
  t.equal(res.body, '{"message":"Item added successfully"}')
  t.equal(res.headers['content-type'], 'application/json; charset=utf-8')
  t.same(await storedItems(), ['apple'])
})

t.test('GET /items/ of an empty list answers an empty array', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/items/' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { items: [] })
})

t.test('GET /items/ lists names in insertion order, duplicates included', async (t) => {
  for (const name of ['pear', 'apple', 'pear', 'fig']) await add(name)
  const res = await app.inject({ method: 'GET', url: '/items/' })
  t.same(res.json(), { items: ['pear', 'apple', 'pear', 'fig'] })
})

t.test('/items and /items/ answer alike for GET and POST', async (t) => {
  const created = await add('kiwi', '/items')
  t.equal(created.statusCode, 201)
  t.same(created.json(), { message: 'Item added successfully' })
  const listed = await app.inject({ method: 'GET', url: '/items' })
  t.same(listed.json(), { items: ['kiwi'] })
})

t.test('other fields of the body are ignored', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'plum', colour: 'purple' } })
  t.equal(res.statusCode, 201)
  t.same(await storedItems(), ['plum'])
})

t.test('DELETE removes every occurrence and answers 200 naming the item', async (t) => {
  for (const name of ['pear', 'apple', 'pear', 'fig', 'pear']) await add(name)
  const res = await app.inject({ method: 'DELETE', url: '/items/pear' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { message: 'Item pear deleted successfully' })
  t.same(await storedItems(), ['apple', 'fig'])
})

t.test('DELETE of a name not in the list answers 404 Item not found and changes nothing', async (t) => {
  for (const name of ['apple', 'fig']) await add(name)
  const res = await app.inject({ method: 'DELETE', url: '/items/banana' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { detail: 'Item not found' })
  t.same(await storedItems(), ['apple', 'fig'])
})

t.test('DELETE percent-decodes the name: spaces, slashes and unicode', async (t) => {
  const names = ['green apple', 'a/b', 'café ☕', '100%', 'x+y', '🍐']
  for (const name of names) await add(name)
  for (const name of names) {
    const res = await app.inject({ method: 'DELETE', url: `/items/${encodeURIComponent(name)}` })
    t.equal(res.statusCode, 200, name)
    t.same(res.json(), { message: `Item ${name} deleted successfully` }, name)
  }
  t.same(await storedItems(), [])
})

t.test('a 1024-character name can be added and deleted', async (t) => {
  const name = 'é'.repeat(1024)
  t.equal((await add(name)).statusCode, 201)
  const res = await app.inject({ method: 'DELETE', url: `/items/${encodeURIComponent(name)}` })
  t.equal(res.statusCode, 200)
  t.same(await storedItems(), [])
})

t.test('a 1024-character name of astral characters (two UTF-16 units each) can be deleted', async (t) => {
  const name = '🍐'.repeat(1024)
  t.equal((await add(name)).statusCode, 201)
  const res = await app.inject({ method: 'DELETE', url: `/items/${encodeURIComponent(name)}` })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { message: `Item ${name} deleted successfully` })
  t.same(await storedItems(), [])
})

t.test('names are stored exactly as sent, whitespace and case included', async (t) => {
  for (const name of [' Apple ', 'apple', 'APPLE']) await add(name)
  t.same(await storedItems(), [' Apple ', 'apple', 'APPLE'])
  await app.inject({ method: 'DELETE', url: '/items/apple' })
  t.same(await storedItems(), [' Apple ', 'APPLE'])
})

t.test('the list lives at ITEMS_KEY: an index of chunks there, the names in Redis lists under it', async (t) => {
  await add('apple')
  t.equal(await inspector.type('items'), 'zset')
  t.same(await inspector.lRange('items:chunk:1', 0, -1), ['apple'])
})

t.test('an unknown route answers 404 Not Found', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/nothing-here' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { detail: 'Not Found' })
})

t.test('a method the path does not have answers 404 Not Found', async (t) => {
  const res = await app.inject({ method: 'PUT', url: '/items/' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { detail: 'Not Found' })
})
