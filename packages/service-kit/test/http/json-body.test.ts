import t from 'tap'
import { buildService } from '../helpers/service.ts'

const post = (payload: string | Buffer, contentType = 'application/json') => ({
  method: 'POST' as const,
  url: '/echo',
  headers: { 'content-type': contentType },
  payload,
})

t.test('a body that is not valid UTF-8 is answered 400 and reaches no route', async (t) => {
  const { app } = await buildService(t)
  const bodies = [
    Buffer.from('{"name":"a\xffb"}', 'latin1'),
    // A UTF-16 surrogate encoded as UTF-8 (CESU): not UTF-8.
    Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
  ]
  for (const body of bodies) {
    const res = await app.inject(post(body))
    t.equal(res.statusCode, 400)
    t.same(res.json(), { detail: 'Body is not valid UTF-8 JSON' })
    t.equal(res.headers['cache-control'], 'no-store')
  }
})

t.test('a body that declares another charset is answered 400; UTF-8, declared or not, is read as sent', async (t) => {
  const { app } = await buildService(t)
  const latin1 = await app.inject(post(Buffer.from('{"name":"caf\xe9"}', 'latin1'), 'application/json; charset=latin1'))
  t.equal(latin1.statusCode, 400)
  t.same(latin1.json(), { detail: 'Body is not valid UTF-8 JSON' })
  for (const contentType of ['application/json', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"']) {
    const res = await app.inject(post('{"name":"café 🍵"}', contentType))
    t.equal(res.statusCode, 200, contentType)
    t.same(res.json(), { received: { name: 'café 🍵' } })
  }
})

t.test('only UTF-8 is read: a body declaring any other charset is answered 400, even when its bytes would pass', async (t) => {
  const { app } = await buildService(t)
  // Plain ASCII: valid UTF-8 too, so only the declared charset can refuse it.
  const ascii = '{"name":"cafe"}'
  for (const contentType of [
    'application/json; charset=latin1',
    'application/json;charset=latin1',
    'application/json; charset="utf-16"',
    'application/json; charset = latin1',
    'application/json; charset=x-utf-8',
    'application/json; charset=utf-8y',
  ]) {
    const res = await app.inject(post(ascii, contentType))
    t.equal(res.statusCode, 400, contentType)
    t.same(res.json(), { detail: 'Body is not valid UTF-8 JSON' }, contentType)
  }
  for (const contentType of ['application/json; charset=utf8', 'application/json; charset=UTF8', 'application/json; charset=Utf-8']) {
    const res = await app.inject(post(ascii, contentType))
    t.equal(res.statusCode, 200, contentType)
    t.same(res.json(), { received: { name: 'cafe' } }, contentType)
  }
})

t.test('__proto__ and constructor keys are dropped, and the other fields read as sent', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject(post('{"name":"p","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'))
  t.equal(res.statusCode, 200)
  t.same(res.json(), { received: { name: 'p' } })
})

t.test('a body carrying __proto__ or constructor.prototype, at any depth, cannot give the objects a route builds from it a prototype', async (t) => {
  const { app } = await buildService(t)
  // What a route may do with a body: copy it with Object.assign, which assigns an own
  // "__proto__" key through the setter, so that the copy would inherit what the caller chose.
  app.post('/copy', async (request) => {
    const body = request.body as { nested: object }
    const copy = Object.assign({}, body) as { polluted?: unknown }
    const nestedCopy = Object.assign({}, body.nested) as { polluted?: unknown }
    return {
      keys: Object.keys(body),
      nestedKeys: Object.keys(body.nested),
      copyInherits: copy.polluted ?? null,
      nestedCopyInherits: nestedCopy.polluted ?? null,
      plainPrototype: Object.getPrototypeOf(body) === Object.prototype && Object.getPrototypeOf(body.nested) === Object.prototype,
    }
  })
  const hostile = '{"__proto__":{"polluted":"top"},"constructor":{"prototype":{"polluted":"ctor"}},"nested":{"__proto__":{"polluted":"deep"},"kept":1}}'
  const res = await app.inject({ ...post(hostile), url: '/copy' })
  t.equal(res.statusCode, 200, 'stripped, not refused')
  t.same(res.json(), { keys: ['nested'], nestedKeys: ['kept'], copyInherits: null, nestedCopyInherits: null, plainPrototype: true })
})

t.test('malformed JSON is still answered 400 in the service shape', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject(post('{"name":'))
  t.equal(res.statusCode, 400)
  t.match(res.json(), { detail: /not valid JSON/ })
})
