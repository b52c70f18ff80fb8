import t from 'tap'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { pino } from 'pino'
import { AccessLog } from '../src/index.ts'

function recordingLogger() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => lines.push({ level, fields, message })
  return { lines, logger: { debug: at('debug'), info: at('info'), error: at('error') } }
}

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
  const { lines, logger } = recordingLogger()
  const request = { log: logger } as unknown as FastifyRequest
  const reply = { log: logger, elapsedTime: 2 } as unknown as FastifyReply

  const failure = new Error('socket hang up')
  new AccessLog().requestCompleted(failure, request, reply)

  t.equal(lines[0]?.level, 'error')
  t.equal(lines[0]?.message, 'request errored')
  t.equal(lines[0]?.fields.err, failure, 'for the logger\'s err serializer (createLogger drops its stack)')
})
