import t from 'tap'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { pino } from 'pino'
import { captureLogs } from '@repo/test-support'
import { setTimeout as sleep } from 'node:timers/promises'
import { AccessLog } from '../../src/index.ts'
import { buildService } from '../helpers/service.ts'

/** A request's logger as Fastify makes it: a child with its `reqId`. */
function requestLogger() {
  const logs = captureLogs()
  return { lines: logs.lines, log: pino({ level: 'info' }, logs.destination).child({ reqId: 'req-1' }) }
}

const plainRequest = { method: 'GET', url: '/things/1', ip: '127.0.0.1' } as unknown as FastifyRequest

async function serveOnce(level: string) {
  const logs = captureLogs()
  const app = Fastify({ loggerInstance: pino({ level }, logs.destination), logController: new AccessLog() })
  app.get('/things/:id', async () => ({ ok: true }))
  await app.inject({ method: 'GET', url: '/things/7?full=1', headers: { authorization: 'Bearer secret' } })
  await app.close()
  return logs.lines.filter((line) => typeof line.reqId === 'string')
}

t.test('a request is logged once, when its answer has been sent: method, url, status, client, time', async (t) => {
  const [line, ...others] = await serveOnce('info')
  t.same(others, [])
  t.match(line, { level: 30, msg: 'request completed', method: 'GET', url: '/things/7?full=1', statusCode: 200, remoteAddress: '127.0.0.1' })
  t.type(line?.responseTime, 'number')
  t.notMatch(JSON.stringify(line), 'secret', 'no header is logged')
})

t.test('the access line’s responseTime is in milliseconds, as Fastify’s own is: an answer that took 200 ms says about 200', async (t) => {
  // The server as both services make it (createServer), not a bare Fastify with the controller.
  const { app, lines } = await buildService(t)
  app.get('/takes-200-ms', async () => {
    await sleep(200)
    return { ok: true }
  })
  await app.inject({ url: '/takes-200-ms' })
  const line = lines.find((logged) => logged.msg === 'request completed' && logged.url === '/takes-200-ms')
  const responseTime = Number(line?.responseTime)
  // In seconds it would be 0.2; in microseconds, 200 000. The upper bound is a loaded machine's margin.
  t.ok(responseTime >= 200 && responseTime < 2_500, `200 ms is logged as ${responseTime}`)
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
  const { lines, log } = requestLogger()
  const failure = new Error('socket hang up')
  new AccessLog().requestCompleted(failure, plainRequest, { log, statusCode: 200, elapsedTime: 2 } as unknown as FastifyReply)
  t.match(lines[0], { level: 50, msg: 'request errored', err: { message: 'socket hang up' }, url: '/things/1' })
  t.equal(lines.length, 1, 'and not as completed too')
})

t.test('a logger with a mixin (trace ids) writes the access line through pino, mixin included', async (t) => {
  const { destination, lines } = captureLogs()
  const logger = pino({ level: 'info', mixin: () => ({ trace_id: 'abc' }) }, destination)
  const app = Fastify({ loggerInstance: logger, logController: new AccessLog() })
  app.get('/', async () => 'ok')
  await app.inject({ method: 'GET', url: '/' })
  await app.close()
  t.match(lines.find((line) => line.msg === 'request completed'), { trace_id: 'abc', method: 'GET', url: '/', statusCode: 200 })
})

t.test('no access line is written above info', async (t) => {
  t.same(await serveOnce('warn'), [])
})

t.test('a client whose address is gone (its socket closed) is logged without remoteAddress', async (t) => {
  const { lines, log } = requestLogger()
  const request = { method: 'GET', url: '/things/1', ip: undefined } as unknown as FastifyRequest
  new AccessLog().requestCompleted(null, request, { log, statusCode: 200, elapsedTime: 1.5 } as unknown as FastifyReply)
  t.match(lines[0], { msg: 'request completed', url: '/things/1', statusCode: 200 })
  t.notOk(lines[0] && 'remoteAddress' in lines[0])
})
