import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { HttpError, errorHandling, frameworkErrorHandler, type ErrorHandlingOptions } from '../src/index.ts'

class StoreDown extends Error {}

async function build(t: Test, options: Partial<ErrorHandlingOptions> = {}) {
  const logLines: string[] = []
  const errorBody = (message: string) => ({ detail: message })
  const app = Fastify({
    frameworkErrors: frameworkErrorHandler({ errorBody }),
    logger: { level: 'info', stream: { write: (line: string) => logLines.push(line) } },
    bodyLimit: 64,
    ajv: { customOptions: { coerceTypes: false } },
  })
  app.removeContentTypeParser('text/plain')
  await app.register(errorHandling, { errorBody, ...options })

  app.get('/http-error', async () => {
    throw new HttpError(403, { error: 'Forbidden here' }, { headers: { 'retry-after': '30' } })
  })
  app.get('/things/:id', async () => ({ ok: true }))
  app.get(
    '/strict',
    {
      schema: { querystring: { type: 'object', properties: { id: { type: 'integer' } } } },
      schemaErrorFormatter: () => new Error('Invalid id'),
    },
    async () => ({ ok: true }),
  )
  app.get('/crash', async () => {
    throw new Error('secret internals at /srv/app.js:12')
  })
  app.get('/store-down', async () => {
    throw new StoreDown('connection refused')
  })
  app.post(
    '/things',
    { schema: { body: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } } },
    async () => ({ ok: true }),
  )

  await app.ready()
  t.teardown(() => app.close())
  return { app, logLines }
}

t.test('an HttpError is answered with its own status, body and headers', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/http-error' })
  t.equal(res.statusCode, 403)
  t.same(res.json(), { error: 'Forbidden here' })
  t.equal(res.headers['retry-after'], '30')
})

t.test('every error response carries Cache-Control: no-store', async (t) => {
  const { app } = await build(t)
  for (const url of ['/http-error', '/crash', '/nowhere']) {
    const res = await app.inject({ method: 'GET', url })
    t.equal(res.headers['cache-control'], 'no-store', url)
  }
})

t.test('an unknown route is answered 404 in the service shape', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/nowhere' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), { detail: 'Not Found' })
})

t.test('an unexpected error is answered 500 with a fixed body and no internals', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/crash' })
  t.equal(res.statusCode, 500)
  t.same(res.json(), { detail: 'Internal Server Error' })
  t.notMatch(res.body, /secret internals|at \/|stack/)
})

t.test('the internal error body can be chosen by the service', async (t) => {
  const { app } = await build(t, { internalErrorBody: { error: 'Internal server error', details: 'see logs' } })
  const res = await app.inject({ method: 'GET', url: '/crash' })
  t.same(res.json(), { error: 'Internal server error', details: 'see logs' })
})

t.test('an unexpected error is logged under err, with its message, at error level', async (t) => {
  const { app, logLines } = await build(t)
  await app.inject({ method: 'GET', url: '/crash', headers: { 'x-request-id': 'crash-1' } })
  const line = logLines.map((text) => JSON.parse(text) as { level: number; msg: string; err?: { message: string } }).find((entry) => entry.msg === 'unexpected error')
  t.equal(line?.level, 50)
  t.match(line?.err?.message, /secret internals/)
})

t.test('mapError turns a service error into its answer', async (t) => {
  const { app } = await build(t, {
    mapError: (error) => (error instanceof StoreDown ? new HttpError(503, { detail: 'Store unavailable' }) : undefined),
  })
  const res = await app.inject({ method: 'GET', url: '/store-down' })
  t.equal(res.statusCode, 503)
  t.same(res.json(), { detail: 'Store unavailable' })
})

t.test('an error mapError does not claim is still a 500', async (t) => {
  const { app } = await build(t, { mapError: () => undefined })
  const res = await app.inject({ method: 'GET', url: '/store-down' })
  t.equal(res.statusCode, 500)
})

t.test('a body failing its schema gets the validation status and message', async (t) => {
  const { app } = await build(t, { validationStatus: 422 })
  const res = await app.inject({ method: 'POST', url: '/things', payload: { name: 1 } })
  t.equal(res.statusCode, 422)
  t.same(res.json(), { detail: 'body/name must be string' })
})

t.test('validation failures answer 400 unless the service says otherwise', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'POST', url: '/things', payload: {} })
  t.equal(res.statusCode, 400)
  t.same(res.json(), { detail: "body must have required property 'name'" })
})

t.test("a route's schemaErrorFormatter chooses the validation message", async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/strict?id=x' })
  t.equal(res.statusCode, 400)
  t.same(res.json(), { detail: 'Invalid id' })
})

t.test('an empty JSON body is answered like a missing body', async (t) => {
  const { app } = await build(t, { validationStatus: 422 })
  const empty = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'application/json' } })
  const missing = await app.inject({ method: 'POST', url: '/things' })
  t.equal(empty.statusCode, 422)
  t.same(empty.json(), { detail: 'body must be object' })
  t.equal(missing.statusCode, 422)
  t.same(missing.json(), { detail: 'body must be object' })
})

t.test('malformed JSON is answered 400', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({
    method: 'POST',
    url: '/things',
    headers: { 'content-type': 'application/json' },
    payload: '{"name":',
  })
  t.equal(res.statusCode, 400)
  t.same(res.json(), { detail: "Body is not valid JSON but content-type is set to 'application/json'" })
})

t.test('a body that is not JSON is answered 415', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'POST', url: '/things', headers: { 'content-type': 'text/plain' }, payload: 'x' })
  t.equal(res.statusCode, 415)
  t.same(res.json(), { detail: 'Unsupported Media Type' })
})

t.test('a body over the limit is answered 413', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'POST', url: '/things', payload: { name: 'x'.repeat(100) } })
  t.equal(res.statusCode, 413)
  t.same(res.json(), { detail: 'Request body is too large' })
})

t.test('a malformed percent-encoding in the URL is answered 400 in the service shape', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/things/%E0%A4%A' })
  t.equal(res.statusCode, 400)
  t.same(res.json(), { detail: "'/things/%E0%A4%A' is not a valid url component" })
  t.equal(res.headers['cache-control'], 'no-store')
})

t.test('notFoundPreHandler runs before a request that matches no route is answered 404', async (t) => {
  const seen: string[] = []
  const { app } = await build(t, {
    notFoundPreHandler: (request, _reply, done) => {
      seen.push(request.url)
      done()
    },
  })
  const res = await app.inject({ method: 'GET', url: '/nowhere' })
  t.equal(res.statusCode, 404)
  t.same(seen, ['/nowhere'])
  t.same((await app.inject({ method: 'GET', url: '/things/1' })).statusCode, 200)
  t.same(seen, ['/nowhere'], 'and only then')
})
