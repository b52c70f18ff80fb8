import t from 'tap'
import { LENIENT_REDIS_DEADLINE_MS } from '@repo/test-support'
import { buildService, ITEMS_KEY } from '../helpers/service.ts'

// Idempotency is the subject, not time: at load 12-17 this file's Redis missed production's 500 ms
// deadline and an append answered 503.
const LENIENT = { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) }

const ADDED = { message: 'Item added successfully' }

function post(app: Awaited<ReturnType<typeof buildService>>['app'], name: string, key?: string) {
  return app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })
}

t.test('Idempotency-Key', async (t) => {
  const { app, inspector, storedItems } = await buildService(t, { env: LENIENT })

  t.test('a repeat with the same key and name gets the same 201, marked replayed, and appends nothing', async (t) => {
    const first = await post(app, 'pear', 'key-1')
    t.equal(first.statusCode, 201)
    t.same(first.json(), ADDED)
    t.notOk(first.headers['idempotent-replayed'], 'the first answer is not a replay')

    const again = await post(app, 'pear', 'key-1')
    t.equal(again.statusCode, 201)
    t.same(again.json(), ADDED)
    t.equal(again.headers['idempotent-replayed'], 'true')
    t.same(await storedItems(), ['pear'])
  })

  t.test('fields other than name do not make it another request', async (t) => {
    await post(app, 'fig', 'key-2')
    const res = await app.inject({ method: 'POST', url: '/items/', payload: { name: 'fig', note: 'x' }, headers: { 'idempotency-key': 'key-2' } })
    t.equal(res.headers['idempotent-replayed'], 'true')
    t.same(await storedItems(), ['fig'])
  })

  t.test('the same key with another name is 422 and appends nothing', async (t) => {
    await post(app, 'plum', 'key-3')
    const res = await post(app, 'apple', 'key-3')
    t.equal(res.statusCode, 422)
    t.same(res.json(), { detail: 'Idempotency-Key was already used with another name' })
    t.same(await storedItems(), ['plum'])
  })

  t.test('different keys, or no key, append every time', async (t) => {
    await post(app, 'kiwi', 'key-4')
    await post(app, 'kiwi', 'key-5')
    await post(app, 'kiwi')
    await post(app, 'kiwi')
    t.same(await storedItems(), ['kiwi', 'kiwi', 'kiwi', 'kiwi'])
  })

  t.test('concurrent requests with one key append once; exactly one of them is not a replay', async (t) => {
    const answers = await Promise.all(Array.from({ length: 25 }, () => post(app, 'lime', 'key-6')))
    t.same(new Set(answers.map((res) => res.statusCode)), new Set([201]))
    t.equal(answers.filter((res) => res.headers['idempotent-replayed'] === undefined).length, 1)
    t.same(await storedItems(), ['lime'])
  })

  t.test('without IDEMPOTENCY_TTL_SECONDS a key is remembered for a day (86400 s)', async (t) => {
    await post(app, 'date', 'key-7')
    const ttl = await inspector.ttl(`${ITEMS_KEY}:idempotency:key-7`)
    t.ok(ttl > 86_390 && ttl <= 86_400, `${ttl} s left`)
  })

  t.test('a key of 1–255 printable characters is accepted; any other is 422 and appends nothing', async (t) => {
    t.equal((await post(app, 'a', 'k'.repeat(255))).statusCode, 201)
    t.equal((await post(app, 'b', ' !~"quoted"')).statusCode, 201)
    for (const key of ['', 'k'.repeat(256), 'caf\u00e9']) {
      const res = await post(app, 'never', key)
      t.equal(res.statusCode, 422, JSON.stringify(key).slice(0, 20))
      t.match(res.json(), { detail: /idempotency-key/ })
    }
    t.same(await storedItems(), ['a', 'b'])
  })

  t.test('the OpenAPI document declares the header and the replay marker', async (t) => {
    const operation = (await app.inject({ method: 'GET', url: '/docs/json' })).json<{
      paths: Record<string, { post: { parameters: { in: string; name: string }[]; responses: Record<string, { headers: Record<string, unknown> }> } }>
    }>().paths['/items/']?.post
    t.ok(operation?.parameters.some((parameter) => parameter.in === 'header' && parameter.name === 'idempotency-key'))
    t.ok(operation?.responses['201']?.headers['Idempotent-Replayed'])
  })
})

t.test('a key is remembered for the IDEMPOTENCY_TTL_SECONDS the service is configured with', async (t) => {
  const { app, inspector } = await buildService(t, { env: { ...LENIENT, IDEMPOTENCY_TTL_SECONDS: '120' } })
  t.equal((await post(app, 'quince', 'key-ttl')).statusCode, 201)
  const ttl = await inspector.ttl(`${ITEMS_KEY}:idempotency:key-ttl`)
  t.ok(ttl > 110 && ttl <= 120, `${ttl} s left`)
})
