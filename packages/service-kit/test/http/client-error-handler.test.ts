import t from 'tap'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { clientErrorHandler } from '../../src/http/client-errors.ts'

/** A socket that records what is written to it and whether it was destroyed. */
function fakeSocket(state: { destroyed?: boolean; writable?: boolean }) {
  const written: string[] = []
  let destroyed = state.destroyed ?? false
  let ended = false
  const socket = {
    get destroyed() {
      return destroyed
    },
    get writableEnded() {
      return ended
    },
    writable: state.writable ?? true,
    end: (data: string) => {
      written.push(data)
      ended = true
    },
    destroy: () => (destroyed = true),
  }
  return { socket: socket as unknown as Socket, written, isDestroyed: () => destroyed }
}

const app = { log: { info: () => {} } } as unknown as FastifyInstance
const answer = clientErrorHandler((message) => ({ detail: message }))

t.test('a reset connection, or one already destroyed, is left alone', async (t) => {
  const reset = fakeSocket({})
  answer.call(app, Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), reset.socket)
  t.same(reset.written, [])
  t.notOk(reset.isDestroyed(), 'Node destroys it itself')

  const gone = fakeSocket({ destroyed: true })
  answer.call(app, Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD' }), gone.socket)
  t.same(gone.written, [])
})

t.test('a socket that can no longer be written to is closed without an answer', async (t) => {
  const closing = fakeSocket({ writable: false })
  answer.call(app, Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_METHOD' }), closing.socket)
  t.same(closing.written, [])
  t.ok(closing.isDestroyed())
})

t.test('an error without a code is bad framing: 400, logged with its message', async (t) => {
  const logged: Record<string, unknown>[] = []
  const recording = { log: { info: (fields: Record<string, unknown>) => logged.push(fields) } } as unknown as FastifyInstance
  const open = fakeSocket({})
  answer.call(recording, new Error('something odd'), open.socket)
  t.match(open.written[0], /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*\r\n\r\n\{"detail":"Bad request"\}$/)
  t.match(logged[0], { statusCode: 400, reason: 'something odd' })

  answer.call(recording, new Error('more of the same'), open.socket)
  t.equal(open.written.length, 1, 'an answered connection gets nothing more')
  t.equal(logged.length, 1, 'nor another log line')
})
