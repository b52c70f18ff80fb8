import t from 'tap'
import type { InjectOptions } from 'fastify'
import { exchangeRaw } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

const { app, storedItems, inspector } = await buildService(t)

const JSON_HEADERS = { 'content-type': 'application/json' }

const UNADDRESSABLE = 'body/name must not be "." or "..": a URL cannot address them'

interface BadInput {
  rule: string
  request: Omit<InjectOptions, 'method' | 'url'>
  status: number
  detail: string | RegExp
}

// Every invalid body: the status the README's items-list API gives, a JSON `detail`, never a 500.
const badBodies: BadInput[] = [
  { rule: 'no body at all', request: {}, status: 422, detail: 'body must be object' },
  { rule: 'an empty JSON body', request: { headers: JSON_HEADERS, payload: '' }, status: 422, detail: 'body must be object' },
  { rule: 'a JSON array', request: { headers: JSON_HEADERS, payload: '[]' }, status: 422, detail: 'body must be object' },
  { rule: 'a JSON string', request: { headers: JSON_HEADERS, payload: '"x"' }, status: 422, detail: 'body must be object' },
  { rule: 'a JSON null', request: { headers: JSON_HEADERS, payload: 'null' }, status: 422, detail: 'body must be object' },
  { rule: 'an object without name', request: { payload: {} }, status: 422, detail: "body must have required property 'name'" },
  { rule: 'a numeric name', request: { payload: { name: 123 } }, status: 422, detail: 'body/name must be string' },
  { rule: 'a null name', request: { payload: { name: null } }, status: 422, detail: 'body/name must be string' },
  { rule: 'an array name', request: { payload: { name: ['x'] } }, status: 422, detail: 'body/name must be string' },
  { rule: 'an empty name', request: { payload: { name: '' } }, status: 422, detail: 'body/name must NOT have fewer than 1 characters' },
  {
    rule: 'a 1025-character name',
    request: { payload: { name: 'x'.repeat(1025) } },
    status: 422,
    detail: 'body/name must NOT have more than 1024 characters',
  },
  {
    rule: 'a name with a lone surrogate, which Redis could not store as sent',
    request: { headers: JSON_HEADERS, payload: '{"name":"\\ud800"}' },
    status: 422,
    detail: /^body\/name must match pattern/,
  },
  { rule: 'the name ".", which a URL cannot address', request: { payload: { name: '.' } }, status: 422, detail: UNADDRESSABLE },
  { rule: 'the name "..", which a URL cannot address', request: { payload: { name: '..' } }, status: 422, detail: UNADDRESSABLE },
  { rule: 'malformed JSON', request: { headers: JSON_HEADERS, payload: '{"name":' }, status: 400, detail: /not valid JSON/ },
  { rule: 'a text/plain body', request: { headers: { 'content-type': 'text/plain' }, payload: 'apple' }, status: 415, detail: 'Unsupported Media Type' },
  {
    rule: 'a form-encoded body',
    request: { headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'name=apple' },
    status: 415,
    detail: 'Unsupported Media Type',
  },
  {
    rule: 'a body just over 16 KiB, even with a valid name',
    request: { headers: JSON_HEADERS, payload: JSON.stringify({ name: 'apple', padding: 'x'.repeat(16 * 1024) }) },
    status: 413,
    detail: 'Request body is too large',
  },
  {
    rule: 'a 1 MiB body',
    request: { headers: JSON_HEADERS, payload: JSON.stringify({ name: 'x'.repeat(1024 * 1024) }) },
    status: 413,
    detail: 'Request body is too large',
  },
]

for (const { rule, request, status, detail } of badBodies) {
  t.test(`POST /items/ with ${rule} answers ${status} with a detail and changes nothing`, async (t) => {
    await inspector.rPush('items', 'existing')
    const res = await app.inject({ method: 'POST', url: '/items/', ...request })
    t.equal(res.statusCode, status)
    t.match(res.headers['content-type'], /^application\/json/)
    t.match(res.json(), { detail })
    t.same(Object.keys(res.json<object>()), ['detail'])
    t.same(await storedItems(), ['existing'])
  })
}

/** The path `fetch` and browsers send for `DELETE /items/{name}`: WHATWG URL parsing resolves dot segments, encoded or not. */
const pathSentFor = (name: string) => new URL(`http://localhost/items/${encodeURIComponent(name)}`).pathname

t.test('"." and ".." are refused because a URL client could never delete them: it sends their DELETE to another path', async (t) => {
  t.equal(pathSentFor('.'), '/items/')
  t.equal(pathSentFor('..'), '/')
})

t.test('POST of "." or ".." with an Idempotency-Key answers 422 and records no key: the key then appends another name', async (t) => {
  for (const name of ['.', '..']) {
    const res = await app.inject({ method: 'POST', url: '/items/', headers: { 'idempotency-key': `dots-${name}` }, payload: { name } })
    t.equal(res.statusCode, 422, name)
    t.same(res.json(), { detail: UNADDRESSABLE })
    const next = await app.inject({ method: 'POST', url: '/items/', headers: { 'idempotency-key': `dots-${name}` }, payload: { name: 'apple' } })
    t.equal(next.statusCode, 201, `the key of ${name} is free`)
    t.notOk(next.headers['idempotent-replayed'])
  }
  t.same(await storedItems(), ['apple', 'apple'])
})

// Over a real socket: app.inject() parses its URL as a WHATWG client does, and resolves the dots.
t.test('"." and ".." that an earlier version stored are deleted by a client that sends the path as written', async (t) => {
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  await inspector.rPush('items', ['.', '..', 'existing'])
  for (const [path, name] of [['/items/%2E', '.'], ['/items/%2E%2E', '..']] as const) {
    const answer = await exchangeRaw(port, `DELETE ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    t.equal(answer.status, 200, path)
    t.same(JSON.parse(answer.body), { message: `Item ${name} deleted successfully` })
  }
  t.same(await storedItems(), ['existing'])
})

for (const name of ['...', '.a', 'a.', '.. ', ' .', '%2E%2E']) {
  t.test(`the name ${JSON.stringify(name)}, dots and more, is appended and deleted through the path a URL client sends`, async (t) => {
    const added = await app.inject({ method: 'POST', url: '/items/', payload: { name } })
    t.equal(added.statusCode, 201)
    t.same(await storedItems(), [name])
    const deleted = await app.inject({ method: 'DELETE', url: pathSentFor(name) })
    t.equal(deleted.statusCode, 200)
    t.same(deleted.json(), { message: `Item ${name} deleted successfully` })
    t.same(await storedItems(), [])
  })
}

t.test('DELETE with a name of 1025 astral characters answers 422, not 404', async (t) => {
  const res = await app.inject({ method: 'DELETE', url: `/items/${encodeURIComponent('🍐'.repeat(1025))}` })
  t.equal(res.statusCode, 422)
  t.same(res.json(), { detail: 'params/item_name must NOT have more than 1024 characters' })
})

t.test('DELETE with a name longer than 1024 characters answers 422 and changes nothing', async (t) => {
  await inspector.rPush('items', 'existing')
  const res = await app.inject({ method: 'DELETE', url: `/items/${'x'.repeat(1025)}` })
  t.equal(res.statusCode, 422)
  t.same(res.json(), { detail: 'params/item_name must NOT have more than 1024 characters' })
  t.same(await storedItems(), ['existing'])
})

t.test('DELETE with a malformed percent-encoding answers 400, never 500', async (t) => {
  await inspector.rPush('items', 'existing')
  const res = await app.inject({ method: 'DELETE', url: '/items/%E0%A4%A' })
  t.equal(res.statusCode, 400)
  t.type(res.json<{ detail: unknown }>().detail, 'string')
  t.same(await storedItems(), ['existing'])
})

t.test('DELETE /items/ without a name answers 404 Not Found and changes nothing', async (t) => {
  await inspector.rPush('items', 'existing')
  const res = await app.inject({ method: 'DELETE', url: '/items/' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { detail: 'Not Found' })
  t.same(await storedItems(), ['existing'])
})

t.test('a body of up to 16 KiB is accepted', async (t) => {
  const payload = JSON.stringify({ name: 'apple', padding: '' })
  const body = JSON.stringify({ name: 'apple', padding: 'x'.repeat(16 * 1024 - payload.length) })
  t.equal(Buffer.byteLength(body), 16 * 1024)
  const res = await app.inject({ method: 'POST', url: '/items/', headers: JSON_HEADERS, payload: body })
  t.equal(res.statusCode, 201)
  t.same(await storedItems(), ['apple'])
})

// A body that is not UTF-8 is refused (400), never decoded with each invalid byte turned into
// U+FFFD: that would store, and answer 201 for, a name the client never sent. JSON is UTF-8.
const notUtf8: { rule: string; payload: Buffer; contentType?: string }[] = [
  // What `printf '{"name":"a\xffb"}'` sends.
  { rule: 'a byte 0xFF inside the name', payload: Buffer.from('{"name":"a\xffb"}', 'latin1') },
  {
    rule: 'a UTF-16 surrogate encoded as UTF-8 (bytes ED A0 80) inside the name',
    payload: Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('b"}')]),
  },
  {
    rule: 'a body declared charset=latin1',
    payload: Buffer.from('{"name":"caf\xe9"}', 'latin1'),
    contentType: 'application/json; charset=latin1',
  },
  { rule: 'a plain-ASCII body declared charset=latin1', payload: Buffer.from('{"name":"cafe"}'), contentType: 'application/json; charset=latin1' },
]

for (const { rule, payload, contentType = 'application/json' } of notUtf8) {
  t.test(`POST /items/ with ${rule} answers 400 Body is not valid UTF-8 JSON and changes nothing`, async (t) => {
    await inspector.rPush('items', 'existing')
    const res = await app.inject({ method: 'POST', url: '/items/', headers: { 'content-type': contentType }, payload })
    t.equal(res.statusCode, 400)
    t.same(res.json(), { detail: 'Body is not valid UTF-8 JSON' })
    t.equal(res.headers['cache-control'], 'no-store')
    t.same(await storedItems(), ['existing'])
  })
}

t.test('POST /items/ with the same name in UTF-8, declared or not, stores it as sent', async (t) => {
  for (const contentType of ['application/json', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"']) {
    const res = await app.inject({ method: 'POST', url: '/items/', headers: { 'content-type': contentType }, payload: Buffer.from('{"name":"café"}') })
    t.equal(res.statusCode, 201, contentType)
  }
  t.same(await storedItems(), ['café', 'café', 'café'])
})

// A body with a valid name is appended whatever other keys it holds: prototype keys are dropped
// and the rest read as sent (not refused with a 400), so that nothing in a body can reach a prototype.
const prototypeKeys = [
  { rule: 'a __proto__ key', payload: '{"name":"p","__proto__":{}}' },
  { rule: 'a __proto__ key holding fields', payload: '{"name":"p","__proto__":{"polluted":true,"name":"q"}}' },
  { rule: 'a constructor key', payload: '{"name":"p","constructor":{"prototype":{"polluted":true}}}' },
]

for (const { rule, payload } of prototypeKeys) {
  t.test(`POST /items/ with ${rule} answers 201 and appends exactly the name`, async (t) => {
    await inspector.rPush('items', 'existing')
    const res = await app.inject({ method: 'POST', url: '/items/', headers: JSON_HEADERS, payload })
    t.equal(res.statusCode, 201)
    t.same(res.json(), { message: 'Item added successfully' })
    t.same(await storedItems(), ['existing', 'p'])
    t.equal(({} as { polluted?: unknown }).polluted, undefined, 'no prototype was reached')
  })
}

t.test('POST /items/ with a name only inside __proto__ answers 422: that name is never read', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/items/', headers: JSON_HEADERS, payload: '{"__proto__":{"name":"hidden"}}' })
  t.equal(res.statusCode, 422)
  t.same(res.json(), { detail: "body must have required property 'name'" })
  t.same(await storedItems(), [])
})
