import t from 'tap'
import type { LogLine } from '@repo/test-support'
import { buildService } from './helpers/service.ts'

// The app as buildApp builds it, logging through the service's own logger (createLogger) at
// trace level: every line any part of it writes is recorded.
const { app, logs } = await buildService(t)

const accessLineOf = (url: string) => (line: LogLine) => line.msg === 'request completed' && line.url === url

t.test('every request writes one access line with its method, URL, status and reqId', async (t) => {
  await app.inject({ method: 'GET', url: '/items/', headers: { 'x-request-id': 'access-1' } })
  const line = await logs.waitFor(accessLineOf('/items/'))
  t.match(line, { level: 30, reqId: 'access-1', method: 'GET', url: '/items/', statusCode: 200, responseTime: Number })
  t.equal(logs.lines.filter((entry) => entry.reqId === 'access-1' && entry.msg === 'request completed').length, 1)
})

t.test('/health, /ready and /metrics write no access line', async (t) => {
  for (const url of ['/health', '/ready', '/metrics']) {
    t.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url)
  }
  // A request after them, whose line is written once they have all been answered.
  await app.inject({ method: 'GET', url: '/', headers: { 'x-request-id': 'after-probes' } })
  await logs.waitFor((line) => line.reqId === 'after-probes' && line.msg === 'request completed')

  for (const url of ['/health', '/ready', '/metrics']) {
    t.same(logs.lines.filter((line) => line.url === url || (line.req as { url?: string } | undefined)?.url === url), [], url)
  }
})

t.test('credentials in request headers never reach a log line, even at trace level', async (t) => {
  const secrets = { authorization: 'Bearer tok-3f9a1c', cookie: 'session=ck-77d02e', 'proxy-authorization': 'Basic cHJveHk6cHc=' }
  const requests = [
    { method: 'GET', url: '/items/' },
    { method: 'POST', url: '/items/', payload: { name: 'pear' } },
    { method: 'POST', url: '/items/', payload: {} },
    { method: 'POST', url: '/items/', payload: '{"name":', headers: { 'content-type': 'application/json' } },
    { method: 'DELETE', url: '/items/missing' },
    { method: 'GET', url: '/nothing-here' },
  ] as const
  for (const [index, request] of requests.entries()) {
    const headers = { ...secrets, ...('headers' in request ? request.headers : {}), 'x-request-id': `secret-${index}` }
    await app.inject({ ...request, headers })
    await logs.waitFor((line) => line.reqId === `secret-${index}` && line.msg === 'request completed')
  }

  t.ok(logs.lines.some((line) => line.msg === 'incoming request'), 'trace level logs each request as it arrives')
  const text = logs.text()
  for (const value of ['tok-3f9a1c', 'ck-77d02e', 'cHJveHk6cHc=']) t.notMatch(text, value)
})

t.test('the app’s logger redacts credentials a plugin or route might log with a request’s headers', async (t) => {
  app.log.info({ headers: { authorization: 'Bearer tok-81be44', cookie: 'session=ck-0c3b9d' } }, 'headers logged on purpose')
  const line = await logs.waitFor((entry) => entry.msg === 'headers logged on purpose')
  t.same(line.headers, { authorization: '[Redacted]', cookie: '[Redacted]' })
  t.notMatch(logs.text(), /tok-81be44|ck-0c3b9d/)
})
