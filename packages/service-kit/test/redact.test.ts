import t from 'tap'
import { pino } from 'pino'
import { LOG_REDACT_PATHS } from '../src/index.ts'

t.test('credentials are redacted from log lines, wherever they sit', async (t) => {
  const lines: string[] = []
  const logger = pino({ redact: LOG_REDACT_PATHS }, { write: (line: string) => lines.push(line) })
  logger.info({ req: { headers: { authorization: 'Bearer s3cret-1', cookie: 's3cret-2', 'proxy-authorization': 's3cret-3' } } }, 'in')
  logger.info({ res: { headers: { 'set-cookie': 's3cret-4' } } }, 'out')
  logger.info({ headers: { authorization: 'token s3cret-5', cookie: 's3cret-6' } }, 'upstream call')
  logger.info({ password: 's3cret-8', token: 's3cret-9' }, 'credentials')

  t.equal(lines.length, 4)
  t.notMatch(lines.join(''), 's3cret')
  t.match(lines[0], '"authorization":"[Redacted]"')
  t.match(lines[3], '"password":"[Redacted]"')
})
