import t from 'tap'
import nock from 'nock'
import { exchangeRaw } from '@repo/test-support'
import { buildAggregator } from '../helpers/build.ts'

// Requests Node cannot parse never reach Fastify's hooks; left to itself, Node answers them with
// a bare status line: no body, no X-Request-Id, no security headers, no no-store.
// These go over a real socket, because app.inject() never meets Node's HTTP parser.

nock.disableNetConnect()
nock.enableNetConnect('127.0.0.1')
t.teardown(() => nock.enableNetConnect())

const { app, logs } = await buildAggregator(t)
await app.listen({ host: '127.0.0.1', port: 0 })
const { port } = app.server.address() as { port: number }

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('a 17 KB header is answered 431 in the aggregator shape, with a request id, the security headers and no-store', async (t) => {
  const answer = await exchangeRaw(port, `GET /api/forge/users?user_name=octocat HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`)
  t.equal(answer.status, 431)
  t.same(JSON.parse(answer.body), { error: 'Request header fields too large' })
  t.equal(answer.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(answer.headers['cache-control'], 'no-store')
  t.match(answer.headers['x-request-id'], UUID)
  t.equal(answer.headers['x-content-type-options'], 'nosniff')
  t.equal(answer.headers['x-frame-options'], 'SAMEORIGIN')
  t.match(answer.headers['content-security-policy'], "default-src 'self'")
  t.equal(answer.headers.connection, 'close')
  const logged = logs.lines.filter((line) => line.msg === 'client error')
  t.equal(logged.length, 1, 'one log line')
  t.match(logged[0], { level: 30, reqId: answer.headers['x-request-id'], statusCode: 431, reason: 'HPE_HEADER_OVERFLOW' })
})

t.test('bad framing is answered 400 in the aggregator shape, with a request id and the security headers', async (t) => {
  const answer = await exchangeRaw(port, 'GET /api/forge/users HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab')
  t.equal(answer.status, 400)
  t.same(JSON.parse(answer.body), { error: 'Bad request' })
  t.equal(answer.headers['cache-control'], 'no-store')
  t.match(answer.headers['x-request-id'], UUID)
  t.equal(answer.headers['x-content-type-options'], 'nosniff')
})
