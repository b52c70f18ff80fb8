import t from 'tap'
import { connect, type Socket } from 'node:net'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { LISTENING, createPrivateRedis, eventually, isListening, runServiceSource, startPrivateRedis, waitForStatus } from '@repo/test-support'
import { connectInspector, storedList, type Inspector } from './helpers/service.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
// No drain delay: these tests are about what closing does (service-kit's test/drain-process.test.ts covers the drain).
const runServer = (env: Record<string, string>) => runServiceSource(SERVICE_ROOT, { SHUTDOWN_DELAY_SECONDS: '0', ...env })

t.test('an invalid variable stops the process with exit code 1 and one line per bad variable', async (t) => {
  const server = runServer({ PORT: 'eighty', REDIS_DB: '-1', REDIS_PASSWORD: 'hunter2' })
  t.equal(await server.exited, 1)
  t.match(server.output(), /PORT must be integer\n\s+REDIS_DB must be >= 0/)
  t.notMatch(server.output(), 'hunter2')
})

t.test('it starts while Redis is down, says where it connects, and serves once Redis is up', async (t) => {
  const redis = await createPrivateRedis()
  const server = runServer({ HOST: '127.0.0.1', PORT: '0', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) })
  t.teardown(async () => {
    server.child.kill('SIGKILL')
    await redis.dispose()
  })

  const [, port] = await server.waitFor(LISTENING)
  const base = `http://127.0.0.1:${port}`
  t.match(server.output(), new RegExp(`"host":"127.0.0.1","port":${redis.port}.*"msg":"connecting to Redis"`))
  t.equal((await fetch(`${base}/health`)).status, 200)
  t.equal((await fetch(`${base}/ready`)).status, 503)

  await redis.start()
  await waitForStatus(`${base}/ready`, 200)
  const res = await fetch(`${base}/items/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'late' }),
  })
  t.equal(res.status, 201)
})

t.test('SIGTERM: in-flight requests finish normally, new connections are refused, Redis is closed, exit 0', async (t) => {
  const redis = await startPrivateRedis()
  const inspector = await connectInspector(redis.port)
  // At debug level the service says when a request has arrived, before its body has.
  const server = runServer({ HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'debug', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) })
  t.teardown(async () => {
    server.child.kill('SIGKILL')
    inspector.destroy()
    await redis.dispose()
  })
  const [, port] = await server.waitFor(LISTENING)
  await waitForStatus(`http://127.0.0.1:${port}/ready`, 200)
  t.equal(await countClients(inspector), 2, 'the service holds one Redis connection')

  // A slow client: headers sent, body not yet complete, so the request is in flight.
  const body = JSON.stringify({ name: 'in-flight' })
  const slowPost = await openRequest(
    Number(port),
    `POST /items/ HTTP/1.1\r\nHost: x\r\nX-Request-Id: in-flight\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
  )
  await server.waitFor(/"reqId":"in-flight"[^\n]*"msg":"incoming request"/)

  const sentAt = Date.now()
  server.child.kill('SIGTERM')
  await server.waitFor(/"msg":"shutting down"/)
  t.ok(await connectionRefused(Number(port)), 'a new connection is refused')

  slowPost.write(body.slice(5))
  const response = await readResponse(slowPost)
  t.match(response, /^HTTP\/1\.1 201 /, 'the in-flight request got its normal answer')
  t.match(response, /\{"message":"Item added successfully"\}$/)

  t.equal(await server.exited, 0)
  t.ok(Date.now() - sentAt < 10_000, 'exited within 10 s')
  t.match(server.output(), /"msg":"Redis connection closed"/)
  t.equal(await countClients(inspector), 1, 'only the inspector is still connected to Redis')
  t.same(await storedList(inspector, 'items'), ['in-flight'])
})

async function countClients(client: Inspector): Promise<number> {
  const list = await client.clientList()
  return list.length
}

async function openRequest(port: number, head: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write(head)
  return socket
}

async function readResponse(socket: Socket): Promise<string> {
  let text = ''
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()))
  await once(socket, 'close')
  return text
}

/** Whether new connections are refused, once the listener has had a moment to close. */
function connectionRefused(port: number): Promise<boolean> {
  return eventually(async () => !(await isListening(port)), 40, 25)
}
