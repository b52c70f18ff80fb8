import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import type { AppRequest } from '../../src/credentials/app-calls.ts'
import { createInstallationTokens } from '../../src/credentials/installation-token.ts'

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const MINUTE_MS = 60_000

/** Installation 9001's tokens, minted by a fake that counts its mints, on a clock the test moves. */
function tokensOf9001(answer: (minted: number) => { statusCode: number; text: string } | undefined = () => undefined) {
  let time = 1_800_000_000_000
  const mints: string[] = []
  const send: AppRequest = async ({ method, path }) => {
    t.equal(method, 'POST')
    t.equal(path, '/app/installations/9001/access_tokens')
    const token = `ghs_${mints.length}`
    mints.push(token)
    return answer(mints.length) ?? { statusCode: 201, text: JSON.stringify({ token, expires_at: new Date(time + 60 * MINUTE_MS).toISOString() }) }
  }
  const tokens = createInstallationTokens({ app: { appId: '1', installationId: '9001', privateKey }, now: () => time, send, logger: pino({ level: 'silent' }) })
  return { tokens, mints, advance: (ms: number) => (time += ms) }
}

t.test('a token is minted once for concurrent callers and renewed 5 minutes before it expires, not sooner', async (t) => {
  const { tokens, mints, advance } = tokensOf9001()
  t.same(await Promise.all([tokens.current(), tokens.current()]), ['ghs_0', 'ghs_0'])
  advance(55 * MINUTE_MS - 1)
  t.equal(await tokens.current(), 'ghs_0')
  advance(1)
  t.equal(await tokens.current(), 'ghs_1')
  t.same(mints, ['ghs_0', 'ghs_1'])
})

t.test('a refused token is renewed once, however many calls were refused with it; a refusal of an older one keeps the newer', async (t) => {
  const { tokens, mints } = tokensOf9001()
  const refused = await tokens.current()
  tokens.refused(refused)
  tokens.refused(refused)
  t.equal(await tokens.current(), 'ghs_1')
  tokens.refused(refused)
  t.equal(await tokens.current(), 'ghs_1')
  t.same(mints, ['ghs_0', 'ghs_1'])
})

t.test('a token forgotten or refused is still among the secrets, as is the last JWT, and none is kept once the next one comes', async (t) => {
  const { tokens } = tokensOf9001()
  const first = await tokens.current()
  tokens.forget()
  t.notOk(tokens.hasToken())
  t.ok(tokens.secrets().includes(first))
  t.equal(tokens.secrets().length, 2, 'the forgotten token and the JWT')
  const second = await tokens.current()
  t.ok(tokens.hasToken())
  t.ok(tokens.secrets().includes(second) && tokens.secrets().includes(first))
})

t.test('a mint refused with 404 or 403 says the installation is unavailable; another status is a failure', async (t) => {
  for (const [statusCode, name] of [[404, 'InstallationUnavailable'], [403, 'InstallationUnavailable'], [500, 'UpstreamFailure']] as const) {
    const { tokens } = tokensOf9001(() => ({ statusCode, text: '{"message":"no"}' }))
    await t.rejects(tokens.current(), { name, message: `GitHub App installation token request answered ${statusCode}` })
  }
})
