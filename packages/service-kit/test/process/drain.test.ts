import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { Agent, request } from 'undici'
import { drain } from '../../src/process/drain.ts'

const errorBody = (message: string) => ({ detail: message })

async function drainingApp() {
  const app = Fastify()
  await app.register(drain, { errorBody })
  app.get('/', async () => ({ ok: true }))
  app.get('/ready', { preHandler: app.notReadyWhileDraining }, async () => ({ status: 'ready' }))
  return app
}

t.test('a keep-alive request in flight at close gets its answer with Connection: close, and close() does not wait for the idle timeout', async (t) => {
  const app = Fastify()
  await app.register(drain, { errorBody })
  let started!: () => void
  const handling = new Promise<void>((resolve) => (started = resolve))
  let finish!: () => void
  const finished = new Promise<void>((resolve) => (finish = resolve))
  app.get('/slow', async () => {
    started()
    await finished
    return { done: true }
  })
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  const agent = new Agent({ keepAliveTimeout: 60_000 })
  t.teardown(() => agent.close())

  const inFlight = request(`${address}/slow`, { dispatcher: agent })
  await handling
  const closed = app.close().then(() => 'closed')
  // close() has begun (its preClose hooks ran) before the answer is sent.
  setImmediate(finish)
  const response = await inFlight

  t.equal(response.statusCode, 200)
  t.equal(response.headers.connection, 'close')
  t.same(await response.body.json(), { done: true })
  t.equal(await Promise.race([closed, sleep(5_000, 'still open')]), 'closed')
  t.equal(app.draining, true, 'closing counts as draining')
})

t.test('before the drain, keep-alive connections stay open and /ready answers', async (t) => {
  const app = await drainingApp()
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const agent = new Agent()
  t.teardown(() => agent.close())

  t.equal(app.draining, false)
  const response = await request(address, { dispatcher: agent })
  await response.body.dump()
  t.equal(response.headers.connection, 'keep-alive')
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ready' })
})

t.test('draining: /ready answers 503 "Shutting down" in the service shape, uncached, and every answer closes its connection', async (t) => {
  const app = await drainingApp()
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const agent = new Agent({ keepAliveTimeout: 60_000 })
  t.teardown(() => agent.close())

  app.startDraining()
  t.equal(app.draining, true)
  const ready = await request(`${address}/ready`, { dispatcher: agent })
  t.equal(ready.statusCode, 503)
  t.same(await ready.body.json(), { detail: 'Shutting down' })
  t.equal(ready.headers['cache-control'], 'no-store')
  t.equal(ready.headers.connection, 'close')
  const other = await request(address, { dispatcher: agent })
  t.equal(other.statusCode, 200, 'the app still serves')
  t.same(await other.body.json(), { ok: true })
  t.equal(other.headers.connection, 'close')
})
