import { generateKeyPairSync, randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import nock from 'nock'
import { buildAggregator, testClock, type BuildOptions, type TestAggregator, type TestEnv } from './build.ts'
import { API, searchesEndWith } from './upstream.ts'

/**
 * The credential modes the conformance and economy tests run in (issue 45: "Conformance and the
 * economy bars hold in every credential mode"), against nock's API. A public App's own calls,
 * `GET /users/{login}/installation` and the token mint, are answered here; they go with the
 * App's JWT and spend the App's quota, not the account's, so a test's `scope.done()` and
 * `recordUnexpectedCalls` (the account's calls) are the same in every mode. What a mode adds is
 * one lookup per account not known yet and one mint per installation (per process, per hour):
 * `appCalls` has them, for a test to check.
 */
export interface CredentialMode {
  name: string
  env: TestEnv
  /** The installation `GET /users/{login}/installation` answers for every account; none (404) when undefined. */
  accountInstallation?: string | undefined
  /** The kind of credential an account's calls go with (`forge_upstream_credential_calls_total{credential}`). */
  accountCredential: 'anonymous' | 'app-account' | 'app-default'
  /** Whether the service asks each account's installation (a public App). */
  looksUp: boolean
  /**
   * Whether calls not about an account (`repos`) carry an installation token: the default
   * installation's. A refused token (401) is renewed once and the call asked again: such a
   * failure costs two calls where the anonymous mode's costs one.
   */
  defaultToken: boolean
}

/** How many times a call answered 401 is asked: twice with an installation token (renewed once), once without. */
export const askedOn401 = (withToken: boolean): number => (withToken ? 2 : 1)

export const PUBLIC_APP_ID = '626262'
/** The installation of every account the tests name, in the installed mode: one, so that a budget a test spends is the one its other accounts share, as in the other modes. */
export const ACCOUNT_INSTALLATION = '7007'
/** `FORGE_APP_INSTALLATION_ID`: the accounts without an installation of their own, and `repos`. */
export const DEFAULT_INSTALLATION = '9001'
/** GitHub's installation tokens live an hour. */
const TOKEN_LIFETIME_MS = 60 * 60 * 1000

const privateKeyPem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
const publicApp: TestEnv = { FORGE_APP_PUBLIC: 'true', FORGE_APP_ID: PUBLIC_APP_ID, FORGE_APP_PRIVATE_KEY: privateKeyPem }

export const CREDENTIAL_MODES: readonly CredentialMode[] = [
  { name: 'anonymous', env: {}, accountCredential: 'anonymous', looksUp: false, defaultToken: false },
  {
    name: 'public App, installed account',
    env: { ...publicApp, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION },
    accountInstallation: ACCOUNT_INSTALLATION,
    accountCredential: 'app-account',
    looksUp: true,
    defaultToken: true,
  },
  { name: 'public App, account without installation: the default installation', env: { ...publicApp, FORGE_APP_INSTALLATION_ID: DEFAULT_INSTALLATION }, accountCredential: 'app-default', looksUp: true, defaultToken: true },
  { name: 'public App, account without installation and no default: anonymous', env: publicApp, accountCredential: 'anonymous', looksUp: true, defaultToken: false },
]

/** The App's own calls nock answered (App quota): accounts looked up and installations minted for, in order. */
export interface AppCalls {
  lookups: string[]
  mints: string[]
}

export interface ModeAggregator extends TestAggregator {
  appCalls: AppCalls
  /** Answers the App's calls again: after a test's `nock.cleanAll()`. Nothing in the anonymous mode. */
  answerAppCalls: () => void
  /** Upstream calls sent, by kind of credential, as `/metrics` counts them (zeros left out). */
  sentWith: () => Promise<Record<string, number>>
}

/**
 * The App's calls `mode` adds to answers about `accounts` (each asked once, within the TTLs of
 * its lookup and its token): one lookup per account, one mint per installation used. They spend
 * the App's quota; the accounts' calls are the same as in the anonymous mode.
 */
export function appCallsFor(mode: CredentialMode, accounts: readonly string[]): AppCalls {
  if (!mode.looksUp) return { lookups: [], mints: [] }
  const installation = mode.accountInstallation ?? (mode.env.FORGE_APP_INSTALLATION_ID === undefined ? undefined : String(mode.env.FORGE_APP_INSTALLATION_ID))
  return { lookups: [...accounts], mints: installation === undefined ? [] : [installation] }
}

/** nock 15 hands a reply function the request (a fetch `Request`), though its types still say the path. */
const pathOf = (request: unknown) => new URL((request as Request).url).pathname

const CREDENTIAL_KINDS = ['anonymous', 'token', 'app-default', 'app-account']

/** `buildAggregator` in `mode`: its variables over `options.env`, the App's calls answered by nock. */
export async function buildInMode(t: Test, mode: CredentialMode, options: BuildOptions = {}): Promise<ModeAggregator> {
  const clock = options.clock ?? testClock()
  const appCalls: AppCalls = { lookups: [], mints: [] }
  const answerAppCalls = () => {
    if (!mode.looksUp) return
    nock(API)
      .get(/^\/users\/[^/]+\/installation$/)
      .reply((request: unknown) => {
        const login = decodeURIComponent(/^\/users\/([^/]+)\/installation$/.exec(pathOf(request))![1]!)
        appCalls.lookups.push(login)
        return mode.accountInstallation === undefined ? [404, { message: 'Not Found' }] : [200, { id: Number(mode.accountInstallation), account: { login }, suspended_at: null }]
      })
      .persist()
    nock(API)
      .post(/^\/app\/installations\/\d+\/access_tokens$/)
      .reply((request: unknown) => {
        appCalls.mints.push(/installations\/(\d+)\//.exec(pathOf(request))![1]!)
        const expiresAt = new Date(clock.now() + TOKEN_LIFETIME_MS).toISOString().replace(/\.\d{3}Z$/, 'Z')
        return [201, { token: `ghs_${randomBytes(18).toString('hex')}`, expires_at: expiresAt }]
      })
      .persist()
    // Whose the default installation is (listing the default owner's repositories): not the owner's.
    nock(API)
      .get(/^\/app\/installations\/\d+$/)
      .reply(200, { id: Number(DEFAULT_INSTALLATION), account: { login: 'forge-operator' }, repository_selection: 'all' })
      .persist()
  }
  answerAppCalls()
  searchesEndWith(mode.looksUp ? ' is:public' : '')
  t.teardown(() => searchesEndWith(''))
  const aggregator = await buildAggregator(t, { ...options, clock, env: { ...mode.env, ...options.env } })
  return {
    ...aggregator,
    appCalls,
    answerAppCalls,
    async sentWith() {
      const sent: Record<string, number> = {}
      for (const credential of CREDENTIAL_KINDS) {
        const count = (await aggregator.metric('forge_upstream_credential_calls_total', { credential, outcome: 'sent' })) ?? 0
        if (count > 0) sent[credential] = count
      }
      return sent
    },
  }
}
