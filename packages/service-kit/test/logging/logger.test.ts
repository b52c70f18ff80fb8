import t from 'tap'
import { createLogger } from '../../src/index.ts'
import { captureLogs } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

const SECRET_HEADERS = { authorization: 'Bearer s3cret-1', cookie: 's3cret-2', 'proxy-authorization': 's3cret-3' }

/** The service's logger, every line it writes parsed into `lines`. */
function recordedLogger(level = 'info') {
  const logs = captureLogs()
  const lines: Record<string, unknown>[] = logs.lines
  const logger = createLogger(level, logs.destination)
  return { logger, lines }
}

t.test('credentials in a request never reach a log line, even at trace level', async (t) => {
  const { app, lines } = await buildService(t, { level: 'trace' })
  app.get('/echo', async (request) => {
    request.log.info({ headers: request.headers }, 'headers seen')
    request.log.info({ password: 's3cret-4', token: 's3cret-5' }, 'credentials seen')
    return { ok: true }
  })
  await app.inject({ url: '/echo', headers: SECRET_HEADERS })
  t.ok(lines.some((line) => line.msg === 'incoming request'), 'the request was logged at trace level')
  const seen = lines.find((line) => line.msg === 'headers seen') as { headers: Record<string, string> }
  t.equal(seen.headers.authorization, '[Redacted]')
  t.notMatch(JSON.stringify(lines), 's3cret')
})

// Inside a request Fastify's own serializers turn `req` and `res` into a few fields without
// headers before redaction runs; these lines go through the logger alone, as a line written
// outside a request, or by a serializer that keeps headers, would.
t.test('the logger redacts every place a credential is written: request and response headers, bare headers, password and token fields', async (t) => {
  const { logger, lines } = recordedLogger()
  // Where a credential sits, and a line that puts one there.
  const places: Array<[path: string[], fields: Record<string, unknown>]> = [
    [['req', 'headers', 'authorization'], { req: { headers: { authorization: 'Bearer s3cret-a', accept: 'kept' } } }],
    [['req', 'headers', 'proxy-authorization'], { req: { headers: { 'proxy-authorization': 'Basic s3cret-b' } } }],
    [['req', 'headers', 'cookie'], { req: { headers: { cookie: 'session=s3cret-c' } } }],
    [['res', 'headers', 'set-cookie'], { res: { headers: { 'set-cookie': ['session=s3cret-d'] } } }],
    [['headers', 'authorization'], { headers: { authorization: 'Bearer s3cret-e' } }],
    [['headers', 'proxy-authorization'], { headers: { 'proxy-authorization': 'Basic s3cret-f' } }],
    [['headers', 'cookie'], { headers: { cookie: 'session=s3cret-g' } }],
    [['password'], { password: 's3cret-h' }],
    [['token'], { token: 's3cret-i' }],
  ]
  for (const [path, fields] of places) logger.info(fields, path.join('.'))
  for (const [path] of places) {
    const line = lines.find((entry) => entry.msg === path.join('.'))
    const value = path.reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], line)
    t.equal(value, '[Redacted]', path.join('.'))
  }
  t.notMatch(JSON.stringify(lines), 's3cret')
  t.equal((lines[0] as { req: { headers: { accept: string } } }).req.headers.accept, 'kept', 'other headers are written as given')

  // A request's logger is a child of this one: it redacts the same places.
  const child = logger.child({ reqId: 'r-1' })
  child.info({ req: { headers: SECRET_HEADERS }, res: { headers: { 'set-cookie': 's3cret-j' } } }, 'from a child')
  t.notMatch(JSON.stringify(lines.at(-1)), 's3cret')
})

t.test('an error is logged under err with its type, message and causes, never its stack', async (t) => {
  const { app, lines } = await buildService(t)
  app.get('/crash', async () => {
    throw Object.assign(new Error('store lost', { cause: new Error('socket closed') }), { code: 'E_LOST' })
  })
  const res = await app.inject({ url: '/crash' })
  t.equal(res.statusCode, 500)
  const line = lines.find((entry) => entry.msg === 'unexpected error') as { err: Record<string, unknown> }
  t.match(line.err, { type: 'Error', message: 'store lost: socket closed', code: 'E_LOST' })
  t.notOk('stack' in line.err, 'no stack')
  t.notMatch(JSON.stringify(lines), /at .*logger\.test/)
})

t.test('a value logged under err that is not an Error (null, a string) is written as given', async (t) => {
  const { logger, lines } = recordedLogger()
  logger.warn({ err: null }, 'rejected with null')
  logger.warn({ err: 'gone' }, 'rejected with a string')
  t.match(lines, [
    { msg: 'rejected with null', err: null },
    { msg: 'rejected with a string', err: 'gone' },
  ])
})
