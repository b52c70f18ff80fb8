import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import type { AppRequest } from '../../src/credentials/app-calls.ts'
import { createCredentials } from '../../src/credentials/credentials.ts'
import { RateLimitBudget } from '../../src/upstream/budget.ts'

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const log = pino({ level: 'silent' })
const now = () => 1_800_000_000_000

/** A public App whose accounts `installed` names (login → installation), minting for `live` installations only; default installation 100. */
function publicApp(installed: Record<string, string>, live: Set<string>) {
  let minted = 0
  const send: AppRequest = async ({ path }) => {
    const login = /^\/users\/([^/]+)\/installation$/.exec(path)?.[1]
    if (login !== undefined) return installed[login] ? { statusCode: 200, text: JSON.stringify({ id: Number(installed[login]) }) } : { statusCode: 404, text: '{}' }
    const id = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path)![1]!
    if (!live.has(id)) return { statusCode: 404, text: '{}' }
    return { statusCode: 201, text: JSON.stringify({ token: `ghs_${id}_${minted++}`, expires_at: new Date(now() + 3_600_000).toISOString() }) }
  }
  const budget = new RateLimitBudget({ reserve: 0, now })
  const configured = { kind: 'public-app', appId: '1', privateKey, defaultInstallationId: '100' } as const
  return { credentials: createCredentials({ configured, budget, reserve: 0, send, now, logger: log }), budget }
}

t.test("a public App: an installed account's calls go with its installation and its own budget; any other, and no account, with the default", async (t) => {
  const { credentials, budget } = publicApp({ alice: '101' }, new Set(['100', '101']))
  const alice = await credentials.credentialFor('alice', log)
  t.match(alice, { kind: 'app-account', token: /^ghs_101_/ })
  t.not(alice.budget, budget)
  t.match(await credentials.credentialFor('dave', log), { kind: 'app-default', token: /^ghs_100_/, budget })
  t.match(await credentials.credentialFor(undefined, log), { kind: 'app-default', budget })
})

t.test('a refused token is renewed once: the renewed credential has no renewal of its own', async (t) => {
  const { credentials } = publicApp({ alice: '101' }, new Set(['100', '101']))
  const first = await credentials.credentialFor('alice', log)
  const renewed = await first.renew!()
  t.not(renewed.token, first.token)
  t.equal(renewed.kind, 'app-account')
  t.equal(renewed.renew, undefined)
})

t.test("an installation GitHub will not mint for: the account's calls go with the default from then on, and the token is redacted", async (t) => {
  const live = new Set(['100', '101'])
  const { credentials } = publicApp({ alice: '101' }, live)
  const before = await credentials.credentialFor('alice', log)
  live.delete('101')
  const after = await before.renew!()
  t.match(after, { kind: 'app-default', token: /^ghs_100_/ })
  t.ok(after.renew, "the default's own renewal is left")
  t.match(await credentials.credentialFor('alice', log), { kind: 'app-default' })
  t.equal(credentials.redact(`echo ${before.token!}`), 'echo [redacted]')
})

t.test('a personal token is sent as it is and never renewed; without anything, calls are anonymous', async (t) => {
  const budget = new RateLimitBudget({ reserve: 0, now })
  const send: AppRequest = async () => t.fail('no App call') as never
  const token = createCredentials({ configured: { kind: 'token', token: 'ghp_x' }, budget, reserve: 0, send, now, logger: log })
  t.same(await token.credentialFor('alice', log), { kind: 'token', budget, token: 'ghp_x' })
  t.equal(token.redact('said ghp_x'), 'said [redacted]')
  const anonymous = createCredentials({ configured: { kind: 'anonymous' }, budget, reserve: 0, send, now, logger: log })
  t.same(await anonymous.credentialFor(undefined, log), { kind: 'anonymous', budget, token: undefined })
})

t.test("a mint that fails otherwise (a 500) fails the call: only GitHub's refusal sends the account to the default", async (t) => {
  const budget = new RateLimitBudget({ reserve: 0, now })
  const send: AppRequest = async ({ path }) => (path.endsWith('/installation') ? { statusCode: 200, text: '{"id":101}' } : { statusCode: 500, text: '{}' })
  const configured = { kind: 'public-app', appId: '1', privateKey, defaultInstallationId: '100' } as const
  const credentials = createCredentials({ configured, budget, reserve: 0, send, now, logger: log })
  await t.rejects(credentials.credentialFor('alice', log), { name: 'UpstreamFailure', status: 500 })
})
