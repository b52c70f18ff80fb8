import t from 'tap'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { pino, type LoggerOptions } from 'pino'
import type { AddressInfo } from 'node:net'
import { exchangeRaw } from '@repo/test-support'
import { AccessLog, createLogger } from '../src/index.ts'

/** A request's logger as Fastify makes it (a child with its `reqId`), counting calls to its `info()`. */
function requestLogger(options: LoggerOptions = {}) {
  const lines: string[] = []
  const log = pino({ level: 'info', ...options }, { write: (line: string) => void lines.push(line) }).child({ reqId: 'req-1' })
  let calls = 0
  const info = log.info.bind(log)
  log.info = (...args: Parameters<typeof info>) => {
    calls++
    info(...args)
  }
  return { lines, log, infoCalls: () => calls }
}

const plainRequest = { method: 'GET', url: '/things/1', ip: '127.0.0.1' } as unknown as FastifyRequest

async function serveOnce(level: string) {
  const lines: Record<string, unknown>[] = []
  const app = Fastify({
    loggerInstance: pino({ level }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) }),
    logController: new AccessLog(),
  })
  app.get('/things/:id', async () => ({ ok: true }))
  await app.inject({ method: 'GET', url: '/things/7?full=1', headers: { authorization: 'Bearer secret' } })
  await app.close()
  return lines.filter((line) => typeof line.reqId === 'string')
}

t.test('a request is logged once, when its answer has been sent: method, url, status, client, time', async (t) => {
  const [line, ...others] = await serveOnce('info')
  t.same(others, [])
  t.match(line, { level: 30, msg: 'request completed', method: 'GET', url: '/things/7?full=1', statusCode: 200, remoteAddress: '127.0.0.1' })
  t.type(line?.responseTime, 'number')
  t.notMatch(JSON.stringify(line), 'secret', 'no header is logged')
})

t.test('at debug level the incoming request is logged too, with its method and URL', async (t) => {
  const lines = await serveOnce('debug')
  t.same(
    lines.map((line) => line.msg),
    ['incoming request', 'request completed'],
  )
  t.match(lines[0], { level: 20, req: { method: 'GET', url: '/things/7?full=1' } })
})

t.test('a response that failed on the wire is logged as an error, under err', async (t) => {
  const { lines, log, infoCalls } = requestLogger()
  const failure = new Error('socket hang up')
  new AccessLog().requestCompleted(failure, plainRequest, { log, statusCode: 200, elapsedTime: 2 } as unknown as FastifyReply)
  t.match(JSON.parse(lines[0]!), { level: 50, msg: 'request errored', err: { message: 'socket hang up' }, url: '/things/1' })
  t.equal(infoCalls(), 0)
})

t.test('at info, the access line is written from its template, without pino’s generic path', async (t) => {
  const { lines, log, infoCalls } = requestLogger()
  new AccessLog().requestCompleted(null, plainRequest, { log, statusCode: 200, elapsedTime: 2 } as unknown as FastifyReply)
  t.match(JSON.parse(lines[0]!), { level: 30, msg: 'request completed', reqId: 'req-1', url: '/things/1' })
  t.equal(infoCalls(), 0, 'pino’s info() walks the fields, their serializers and redaction: what the template saves')
})

t.test('a logger with a hook on the written line gets the access line through pino, hook applied', async (t) => {
  const { lines, log, infoCalls } = requestLogger({ hooks: { streamWrite: (line) => line.replace('request completed', 'hooked') } })
  new AccessLog().requestCompleted(null, plainRequest, { log, statusCode: 200, elapsedTime: 2 } as unknown as FastifyReply)
  t.match(JSON.parse(lines[0]!), { msg: 'hooked' })
  t.equal(infoCalls(), 1)
})

/**
 * The access line is written from a template rather than through pino's generic path: it must be
 * the line pino writes for the same fields, byte for byte (time and duration aside), whatever a
 * caller puts in the URL or, behind a trusted proxy, in the client address.
 */
t.test('the access line is the line pino writes for the same fields, escapes included', async (t) => {
  const lines: string[] = []
  const app = Fastify({
    loggerInstance: createLogger('info', { write: (line: string) => void lines.push(line) }),
    logController: new AccessLog(),
    trustProxy: true,
  })
  // What pino itself writes for the access line's fields, logged by the route beside it.
  app.get('/things/*', async (request, reply) => {
    reply.log.info({ method: request.method, url: request.url, statusCode: 200, remoteAddress: request.ip, responseTime: 0 }, 'request completed')
    return 'ok'
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  // Written raw: Node accepts a quote and a backslash in a request line, which any client would encode.
  const requests = [
    { target: '/things/plain', forwardedFor: undefined },
    { target: '/things/"quoted"\\and\\slashed?q=%C3%A9', forwardedFor: undefined },
    { target: '/things/from-proxy', forwardedFor: 'a"b\\c, 10.0.0.1' },
  ]
  for (const { target, forwardedFor } of requests) {
    lines.length = 0
    const proxied = forwardedFor === undefined ? '' : `X-Forwarded-For: ${forwardedFor}\r\n`
    const { status } = await exchangeRaw(port, `GET ${target} HTTP/1.1\r\nHost: x\r\n${proxied}Connection: close\r\n\r\n`)
    t.equal(status, 200)
    const [byPino, byAccessLog] = lines.map((line) => line.replace(/"time":\d+/, '"time":0').replace(/"responseTime":[\d.e-]+/, '"responseTime":0'))
    t.ok(byAccessLog?.endsWith('}\n'), `one line for ${target}`)
    t.equal(byAccessLog, byPino, target)
  }
  await app.close()
})

t.test('a logger with a mixin (trace ids) writes the access line through pino, mixin included', async (t) => {
  const lines: Record<string, unknown>[] = []
  const logger = pino({ level: 'info', mixin: () => ({ trace_id: 'abc' }) }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) })
  const app = Fastify({ loggerInstance: logger, logController: new AccessLog() })
  app.get('/', async () => 'ok')
  await app.inject({ method: 'GET', url: '/' })
  await app.close()
  t.match(lines.find((line) => line.msg === 'request completed'), { trace_id: 'abc', method: 'GET', url: '/', statusCode: 200 })
})

t.test('no access line is written above info', async (t) => {
  t.same(await serveOnce('warn'), [])
})

t.test("a client whose address is gone (its socket closed) gets the line pino writes: no remoteAddress", async (t) => {
  const lines: string[] = []
  const log = createLogger('info', { write: (line: string) => void lines.push(line) }).child({ reqId: 'req-1' })
  const request = { method: 'GET', url: '/things/1', ip: undefined } as unknown as FastifyRequest
  const reply = { log, statusCode: 200, elapsedTime: 1.5 } as unknown as FastifyReply
  new AccessLog().requestCompleted(null, request, reply)
  log.info({ method: 'GET', url: '/things/1', statusCode: 200, remoteAddress: undefined, responseTime: 1.5 }, 'request completed')
  const [byAccessLog, byPino] = lines.map((line) => line.replace(/"time":\d+/, '"time":0'))
  t.equal(byAccessLog, byPino)
  t.notMatch(byAccessLog, 'remoteAddress')
})
