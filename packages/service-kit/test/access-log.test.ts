import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { AccessLog } from '../src/index.ts'

function recordingLogger() {
  const lines: { level: string; fields: Record<string, unknown>; message: string }[] = []
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => lines.push({ level, fields, message })
  return { lines, logger: { debug: at('debug'), info: at('info'), error: at('error') } }
}

t.test('a request is logged once, when its answer has been sent, with method, url, status and time', async (t) => {
  const { lines, logger } = recordingLogger()
  const request = { log: logger } as unknown as FastifyRequest
  const reply = { log: logger, elapsedTime: 1.5 } as unknown as FastifyReply
  const accessLog = new AccessLog()

  accessLog.incomingRequest(request)
  accessLog.requestCompleted(null, request, reply)

  t.same(
    lines.map(({ level, message }) => [level, message]),
    [
      ['debug', 'incoming request'],
      ['info', 'request completed'],
    ],
  )
  t.equal(lines[1]?.fields.req, request)
  t.equal(lines[1]?.fields.res, reply)
  t.equal(lines[1]?.fields.responseTime, 1.5)
})

t.test('a response that failed on the wire is logged as an error, without a stack', async (t) => {
  const { lines, logger } = recordingLogger()
  const request = { log: logger } as unknown as FastifyRequest
  const reply = { log: logger, elapsedTime: 2 } as unknown as FastifyReply

  new AccessLog().requestCompleted(new Error('socket hang up'), request, reply)

  t.equal(lines[0]?.level, 'error')
  t.equal(lines[0]?.message, 'request errored')
  t.same(lines[0]?.fields.error, { type: 'Error', message: 'socket hang up' })
})
