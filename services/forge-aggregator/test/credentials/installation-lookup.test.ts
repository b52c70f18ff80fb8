import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import { createInstallationLookup, type LookupOutcome } from '../../src/credentials/installation-lookup.ts'
import type { AppRequest } from '../../src/credentials/app-calls.ts'

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const log = pino({ level: 'silent' })
/** The rule's hour, written out: a test reading the constant would follow it wherever it went. */
const HOUR_MS = 60 * 60 * 1000

/** An installation lookup whose calls `answer` answers, on a clock the test moves. */
function directory(answer: (login: string) => { statusCode: number; text: string } | Error) {
  let time = 1_800_000_000_000
  const asked: string[] = []
  const outcomes: LookupOutcome[] = []
  const send: AppRequest = async ({ path }) => {
    const login = /^\/users\/([^/]+)\/installation$/.exec(path)![1]!
    asked.push(login)
    const answered = answer(login)
    if (answered instanceof Error) throw answered
    return answered
  }
  const installations = createInstallationLookup({ appId: '1', privateKey, send, now: () => time, onLookup: (outcome) => outcomes.push(outcome) })
  return { installations, asked, outcomes, advance: (ms: number) => (time += ms) }
}

t.test('a suspended installation counts as none; not installed is remembered an hour, then asked again', async (t) => {
  const { installations, asked, outcomes, advance } = directory((login) =>
    login === 'mona' ? { statusCode: 200, text: JSON.stringify({ id: 7, suspended_at: '2026-01-01T00:00:00Z' }) } : { statusCode: 404, text: '{}' },
  )
  t.equal(await installations.installationOf('mona', log), undefined)
  t.equal(await installations.installationOf('octo', log), undefined)
  t.equal(await installations.installationOf('Octo', log), undefined, 'logins are case-insensitive')
  t.same(asked, ['mona', 'octo'])
  t.same(outcomes, ['not_installed', 'not_installed'])
  advance(HOUR_MS - 1)
  t.equal(await installations.installationOf('octo', log), undefined)
  t.same(asked, ['mona', 'octo'], 'within the hour: remembered')
  advance(1)
  t.equal(await installations.installationOf('octo', log), undefined)
  t.same(asked, ['mona', 'octo', 'octo'], 'an hour on: asked again')
})

t.test('concurrent lookups of one account share one call; a lookup that cannot be sent is not remembered', async (t) => {
  let fail = true
  const { installations, asked, outcomes } = directory(() => (fail ? new Error('ECONNRESET') : { statusCode: 200, text: JSON.stringify({ id: 7 }) }))
  t.same(await Promise.all([installations.installationOf('mona', log), installations.installationOf('mona', log)]), [undefined, undefined])
  t.same(asked, ['mona'])
  fail = false
  t.equal(await installations.installationOf('mona', log), '7')
  t.same(outcomes, ['failed', 'installed'])
})

t.test('what a webhook says is what the next request uses, without a lookup', async (t) => {
  const { installations, asked } = directory(() => ({ statusCode: 404, text: '{}' }))
  installations.apply([{ login: 'Mona', installation: '8' }])
  await installations.record([{ login: 'Mona', installation: '8' }])
  t.equal(await installations.installationOf('mona', log), '8')
  installations.apply([{ login: 'mona', installation: null }])
  t.equal(await installations.installationOf('mona', log), undefined)
  t.same(asked, [])
})
