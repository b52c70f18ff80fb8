import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import type { AppRequest } from '../../src/credentials/app-calls.ts'
import { createInstallationPool } from '../../src/credentials/installation-pool.ts'

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const log = pino({ level: 'silent' })
const HOUR_MS = 60 * 60 * 1000

t.test("a forgotten installation's token stays among the secrets to redact, forgotten by a webhook or after a refused mint", async (t) => {
  let time = 1_800_000_000_000
  let refuse = false
  const minted: string[] = []
  const send: AppRequest = async ({ path }) => {
    if (refuse) return { statusCode: 404, text: '{"message":"Not Found"}' }
    const token = `ghs_${path.split('/')[3]}_${minted.length}`
    minted.push(token)
    return { statusCode: 201, text: JSON.stringify({ token, expires_at: new Date(time + HOUR_MS).toISOString() }) }
  }
  const pool = createInstallationPool({ appId: '1', privateKey, send, now: () => time, logger: log, reserve: 0 })
  const uninstalled = await pool.tokensOf('7').current()
  pool.forget('7')
  t.ok(pool.secrets().includes(uninstalled), 'an uninstall webhook')

  const suspended = await pool.tokensOf('8').current()
  time += HOUR_MS
  refuse = true
  await t.rejects(pool.tokensOf('8').current())
  pool.forget('8')
  t.ok(pool.secrets().includes(suspended), 'a refused mint')
  t.equal(pool.tokensInMemory(), 0)
})
