import t, { type Test } from 'tap'
import { exchangeRaw, type RawAnswer } from '@repo/test-support'
import { buildService } from './helpers/service.ts'

// Requests Node cannot parse never reach Fastify's hooks, and Node's own answer to them is a bare
// status line: no body, no X-Request-Id, no security headers, no no-store. The service answers
// them in its own shape instead.
// These go over a real socket, because app.inject() never meets Node's HTTP parser.

const { app, storedItems, inspector, logs } = await buildService(t)
await app.listen({ host: '127.0.0.1', port: 0 })
const { port } = app.server.address() as { port: number }

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** What every answer of the service carries, a client error's included. */
function checkAnswerShape(t: Test, answer: RawAnswer, detail: string) {
  t.same(JSON.parse(answer.body), { detail })
  t.equal(answer.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(answer.headers['cache-control'], 'no-store')
  t.match(answer.headers['x-request-id'], UUID)
  t.equal(answer.headers['x-content-type-options'], 'nosniff')
  t.equal(answer.headers['x-frame-options'], 'SAMEORIGIN')
  t.match(answer.headers['content-security-policy'], "default-src 'self'")
  t.match(answer.headers['strict-transport-security'], /^max-age=\d+/)
  t.equal(answer.headers.connection, 'close')
}

t.test('a 17 KB header is answered 431 in the service shape, with a request id, the security headers and no-store', async (t) => {
  const answer = await exchangeRaw(port, `GET /items/ HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`)
  t.equal(answer.status, 431)
  checkAnswerShape(t, answer, 'Request header fields too large')
  const logged = await logs.waitFor((line) => line.msg === 'client error' && line.reqId === answer.headers['x-request-id'])
  t.match(logged, { level: 30, statusCode: 431, reason: 'HPE_HEADER_OVERFLOW' }, 'one info line, under the answer’s request id')
})

t.test('a POST with both Content-Length and Transfer-Encoding (request smuggling) is answered 400 in the service shape and stores nothing', async (t) => {
  await inspector.rPush('items', 'existing')
  const body = '{"name":"smuggled"}'
  const answer = await exchangeRaw(
    port,
    `POST /items/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
      `Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
  )
  t.equal(answer.status, 400)
  checkAnswerShape(t, answer, 'Bad request')
  t.same(await storedItems(), ['existing'])
})

t.test('two different Content-Length headers are answered 400 in the service shape and store nothing', async (t) => {
  await inspector.rPush('items', 'existing')
  const answer = await exchangeRaw(
    port,
    'POST /items/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 12\r\nContent-Length: 14\r\n\r\n{"name":"a"}',
  )
  t.equal(answer.status, 400)
  checkAnswerShape(t, answer, 'Bad request')
  t.same(await storedItems(), ['existing'])
})

t.test('HTTP/1.1 without Host is answered 400 in the service shape and stores nothing', async (t) => {
  await inspector.rPush('items', 'existing')
  const body = '{"name":"hostless"}'
  const answer = await exchangeRaw(
    port,
    `POST /items/ HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  )
  t.equal(answer.status, 400)
  t.same(JSON.parse(answer.body), { detail: 'Host header is required' })
  t.match(answer.headers['x-request-id'], UUID)
  t.equal(answer.headers['cache-control'], 'no-store')
  t.equal(answer.headers['x-content-type-options'], 'nosniff')
  t.same(await storedItems(), ['existing'])
})
