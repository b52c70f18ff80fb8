import t from 'tap'
import { buildService } from '../helpers/service.ts'

const { app } = await buildService(t)

t.test('/health answers 200 status ok', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/health' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'ok' })
})

t.test('/ready answers 200 while Redis answers PING', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/ready' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { status: 'ready' })
})

t.test('/ready answers 503 {"detail":"Shutting down"} once the process drains, while the items are still served', async (t) => {
  const { app: draining } = await buildService(t)
  draining.startDraining()
  const ready = await draining.inject({ method: 'GET', url: '/ready' })
  t.equal(ready.statusCode, 503)
  t.same(ready.json(), { detail: 'Shutting down' })
  const items = await draining.inject({ method: 'GET', url: '/items/' })
  t.equal(items.statusCode, 200)
  t.equal(items.headers.connection, 'close')
})

t.test('/docs serves the Swagger UI', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/docs/' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /text\/html/)
})

t.test('/docs/json is the OpenAPI document built from the route schemas', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/docs/json' })
  t.equal(res.statusCode, 200)
  const document = res.json<{
    openapi: string
    paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>
  }>()
  t.match(document.openapi, /^3\./)
  t.ok(document.paths['/items/']?.post?.requestBody, 'POST /items/ documents its body')
  t.same(Object.keys(document.paths['/items/']?.post?.responses ?? {}).sort(), ['201', '400', '413', '415', '422', '503', '507'])
  t.same(Object.keys(document.paths['/items/{item_name}']?.delete?.responses ?? {}).sort(), ['200', '404', '422', '503'])
  t.match(JSON.stringify(document.paths['/items/']?.post?.requestBody), /"maxLength":1024/)
})
