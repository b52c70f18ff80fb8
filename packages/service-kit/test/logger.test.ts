import t from 'tap'
import { createLogger } from '../src/index.ts'
import { buildService } from './helpers/service.ts'

const SECRET_HEADERS = { authorization: 'Bearer s3cret-1', cookie: 's3cret-2', 'proxy-authorization': 's3cret-3' }

t.test('credentials in a request never reach a log line, even at trace level', async (t) => {
  const { app, lines } = await buildService(t, { level: 'trace' })
  app.get('/echo', async (request) => {
    request.log.info({ headers: request.headers, req: { headers: request.headers } }, 'headers seen')
    request.log.info({ password: 's3cret-4', token: 's3cret-5' }, 'credentials seen')
    return { ok: true }
  })
  await app.inject({ url: '/echo', headers: SECRET_HEADERS })
  t.ok(lines.some((line) => line.msg === 'incoming request'), 'the request was logged at trace level')
  const seen = lines.find((line) => line.msg === 'headers seen') as { headers: Record<string, string> }
  t.equal(seen.headers.authorization, '[Redacted]')
  t.notMatch(JSON.stringify(lines), 's3cret')
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
  const lines: Record<string, unknown>[] = []
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  logger.warn({ err: null }, 'rejected with null')
  logger.warn({ err: 'gone' }, 'rejected with a string')
  t.match(lines, [
    { msg: 'rejected with null', err: null },
    { msg: 'rejected with a string', err: 'gone' },
  ])
})
