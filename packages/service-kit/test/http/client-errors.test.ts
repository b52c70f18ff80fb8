import t, { type Test } from 'tap'
import { connect } from 'node:net'
import { once } from 'node:events'
import { buildService } from '../helpers/service.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** The raw bytes `request` gets back from a listening service, until it closes the connection. */
async function exchange(t: Test, request: string | string[], options: { paceMs?: number } = {}) {
  const { app, lines } = await buildService(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  const socket = connect(port, '127.0.0.1')
  let answer = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => (answer += chunk))
  socket.on('error', () => {})
  // Not events.once: it would reject on the reset a client still sending may get after its answer.
  const closed = new Promise((resolve) => socket.on('close', resolve))
  await once(socket, 'connect')
  const started = performance.now()
  if (typeof request === 'string') socket.write(request)
  else {
    // One piece at a time, a pause between each, until the server has had enough.
    socket.write(request.shift()!)
    const trickle = setInterval(() => {
      const piece = request.shift()
      if (piece && !socket.destroyed) socket.write(piece)
      else clearInterval(trickle)
    }, options.paceMs ?? 1_000)
    t.teardown(() => clearInterval(trickle))
  }
  await closed
  const [head = '', body = ''] = answer.split('\r\n\r\n')
  return { head, body, seconds: (performance.now() - started) / 1000, lines }
}

function headerOf(head: string, name: string): string | undefined {
  return new RegExp(`^${name}: (.*)$`, 'mi').exec(head)?.[1]
}

t.test('a header too large is answered 431 in the service shape, with a request id, the security headers and no-store', async (t) => {
  const { head, body, lines } = await exchange(t, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`)
  t.match(head, /^HTTP\/1\.1 431 /)
  t.same(JSON.parse(body), { detail: 'Request header fields too large' })
  t.match(headerOf(head, 'x-request-id'), UUID)
  t.equal(headerOf(head, 'x-content-type-options'), 'nosniff')
  t.equal(headerOf(head, 'cache-control'), 'no-store')
  t.equal(headerOf(head, 'content-type'), 'application/json; charset=utf-8')
  t.equal(headerOf(head, 'content-length'), String(Buffer.byteLength(body)), 'the length of the body sent')
  const logged = lines.filter((line) => line.msg === 'client error')
  t.equal(logged.length, 1, 'one line')
  t.match(logged[0], { level: 30, statusCode: 431, reason: 'HPE_HEADER_OVERFLOW' })
})

t.test('bad framing is answered 400 in the service shape, with a request id and the security headers', async (t) => {
  const shapes = [
    'GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
    'GET /health HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n',
    'GET /health HTTP/1.1\r\nHost: x\r\nX-Nul: a\u0000b\r\n\r\n',
  ]
  for (const shape of shapes) {
    const { head, body } = await exchange(t, shape)
    t.match(head, /^HTTP\/1\.1 400 /, JSON.stringify(shape.slice(30, 60)))
    t.same(JSON.parse(body), { detail: 'Bad request' })
    t.match(headerOf(head, 'x-request-id'), UUID)
    t.equal(headerOf(head, 'x-frame-options'), 'SAMEORIGIN')
  }
})

t.test('HTTP/1.1 without Host is answered 400 in the service shape', async (t) => {
  const { head, body } = await exchange(t, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n')
  t.match(head, /^HTTP\/1\.1 400 /)
  t.same(JSON.parse(body), { detail: 'Host header is required' })
  t.match(headerOf(head, 'x-request-id'), UUID)
  t.equal(headerOf(head, 'cache-control'), 'no-store')
})

t.test('HTTP/1.0 without Host is served: Host is required from HTTP/1.1 on', async (t) => {
  const { head, body } = await exchange(t, 'GET /health HTTP/1.0\r\n\r\n')
  t.match(head, /^HTTP\/1\.[01] 200 /)
  t.same(JSON.parse(body), { status: 'ok' })
})

t.test('a client that goes on sending after a client error is disconnected about a second after its answer', async (t) => {
  const { app } = await buildService(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  // allowHalfOpen: the client does not close its side when the server closes its own.
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  socket.on('error', () => {})
  t.teardown(() => socket.destroy())
  const closed = new Promise((resolve) => socket.on('close', resolve))
  let answer = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => (answer += chunk))
  await once(socket, 'connect')
  socket.write('GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab')
  await once(socket, 'end')
  const answered = performance.now()
  t.match(answer, /^HTTP\/1\.1 400 /)
  // What it goes on sending is read and dropped until the server lets the connection go.
  const sending = setInterval(() => socket.destroyed || socket.write('x'), 50)
  t.teardown(() => clearInterval(sending))
  const seconds = await Promise.race([closed.then(() => (performance.now() - answered) / 1000), new Promise((resolve) => setTimeout(resolve, 5_000, 'still open'))])
  t.ok(typeof seconds === 'number' && seconds >= 0.9 && seconds < 2, `closed ${String(seconds)} s after the answer`)
})

t.test('a request trickled in too slowly is answered 408 within a second of 30 s, headers and body alike', async (t) => {
  t.setTimeout(60_000)
  const headers = ['GET /health HTTP/1.1\r\n', ...Array.from({ length: 60 }, (_, index) => `X-Slow-${index}: a\r\n`)]
  const body = [
    'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
    ...Array.from({ length: 100 }, () => ' '),
  ]
  const [slowHeaders, slowBody] = await Promise.all([exchange(t, headers), exchange(t, body)])
  for (const [what, result] of [['headers', slowHeaders], ['body', slowBody]] as const) {
    t.match(result.head, /^HTTP\/1\.1 408 /, what)
    t.same(JSON.parse(result.body), { detail: 'Request timeout' }, what)
    t.ok(result.seconds >= 29.5 && result.seconds < 31, `${what}: closed after ${result.seconds.toFixed(1)} s`)
  }
})
