import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { Agent, request } from 'undici'
import { closeConnectionsOnShutdown } from '../src/plugins/close-connections.ts'

t.test('a keep-alive request in flight at close gets its answer with Connection: close, and close() does not wait for the idle timeout', async (t) => {
  const app = Fastify()
  await app.register(closeConnectionsOnShutdown)
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
})

t.test('before close, keep-alive connections stay open', async (t) => {
  const app = Fastify()
  await app.register(closeConnectionsOnShutdown)
  app.get('/', async () => ({ ok: true }))
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const agent = new Agent()
  t.teardown(() => agent.close())

  const response = await request(address, { dispatcher: agent })
  await response.body.dump()
  t.equal(response.headers.connection, 'keep-alive')
})
