import type { FastifyBaseLogger } from 'fastify'
import type { SharedStore } from '../shared-cache/store.ts'
import type { RateLimitBudget } from '../upstream/budget.ts'
import { InstallationUnavailable, type Redact } from '../upstream/errors.ts'
import type { CredentialKind, UpstreamMetrics } from '../upstream/metrics.ts'
import type { AppRequest } from './app-calls.ts'
import { createInstallationLookup, type AccountChange, type InstallationLookup } from './installation-lookup.ts'
import { createInstallationPool, type InstallationPool } from './installation-pool.ts'
import { createInstallationTokens, type InstallationOwner, type InstallationTokens } from './installation-token.ts'
import type { AppCredentials, PublicAppCredentials, UpstreamCredentials } from './settings.ts'

/**
 * Which credential each upstream call goes with, per account (docs/github-app.md, "A public
 * App"): the one place that knows the installation lookup, the tokens and the budgets. The client
 * asks it once per call; the webhook route tells it what changed.
 */

/** Whom one call spends and how it authenticates. */
export interface Credential {
  kind: CredentialKind
  /** The rate-limit budget the call spends and is checked against. */
  budget: RateLimitBudget
  /** Sent as `Authorization: Bearer`; none for an anonymous call. */
  token: string | undefined
  /**
   * After a 401 for `token`: the credential to ask once more with (a new token, or the default
   * credential's when the account's installation turns out gone). Absent when a 401 is the answer.
   */
  renew?: (() => Promise<Credential>) | undefined
}

/** What an `installation` delivery changes for a public App. */
export interface InstallationChanges {
  /** Accounts whose installation changed: the installation they have now, or none. */
  accounts: AccountChange[]
  /** Installations whose tokens go (uninstalled or suspended). */
  forget: string[]
}

/** The credentials of one process. */
export interface Credentials {
  /**
   * The credential of a call about `account` (a `users` answer's login): with a public App, that
   * account's installation when it has a live one; otherwise, or about no account, the default
   * (a token, the App's installation, or none). Throws `UpstreamFailure` when no token can be minted.
   */
  credentialFor(account: string | undefined, log: FastifyBaseLogger): Promise<Credential>
  /** `message` without any credential this process holds or held lately: the upstream may echo one. */
  redact: Redact
  /** The default installation's account, asked once; undefined without an App or when it cannot be told. */
  defaultInstallationOwner(): Promise<InstallationOwner | undefined>
  /** The default installation was deleted or suspended (a webhook said so): its next call mints a new token. */
  forgetDefaultToken(): void
  /** With a public App, what an `installation` webhook said, in this process. Nothing otherwise. */
  installationsChanged(changes: InstallationChanges): void
  /** With a public App, the accounts' new installations written for every replica (Redis); rejects when they could not be. */
  recordInstallations(accounts: readonly AccountChange[]): Promise<void>
}

export interface CredentialsOptions {
  /** What the configuration says (`credentialsFrom`). */
  configured: UpstreamCredentials
  /** The default credential's budget. */
  budget: RateLimitBudget
  /** `FORGE_BUDGET_RESERVE`, for each installation's budget. */
  reserve: number
  /** The App's own calls, with its JWT. */
  send: AppRequest
  /** Where replicas share lookups and installations' budgets; absent, each process keeps its own. */
  store?: SharedStore | undefined
  now: () => number
  logger: FastifyBaseLogger
  metrics?: UpstreamMetrics | undefined
}

/** What a credential is made from: a token sent as it is, an installation's tokens, or nothing. */
interface Source {
  kind: CredentialKind
  budget: RateLimitBudget
  token?: string | undefined
  tokens?: InstallationTokens | undefined
}

/** A public App's accounts: which installation each has, and the tokens and budgets of those in the pool. */
interface PublicAppAccounts {
  lookup: InstallationLookup
  pool: InstallationPool
  defaultInstallation: string | undefined
}

/** The credentials `options.configured` describes; a public App's accounts' installations found as calls need them. */
export function createCredentials(options: CredentialsOptions): Credentials {
  const { configured, budget, now, send, logger } = options
  const token = configured.kind === 'token' ? configured.token : undefined
  const app = defaultInstallationOf(configured)
  const tokens = app ? createInstallationTokens({ app, now, send, logger }) : undefined
  const fallback: Source = { kind: token !== undefined ? 'token' : tokens ? 'app-default' : 'anonymous', budget, token, tokens }
  const accounts = configured.kind === 'public-app' ? publicAppAccounts(options, configured) : undefined
  options.metrics?.countTokensInMemory(() => (tokens?.hasToken() ? 1 : 0) + (accounts?.pool.tokensInMemory() ?? 0))

  /** `source`'s credential now, its token minted when due; after a 401, `reissue` gives the one to try once more. */
  async function issue(source: Source, reissue?: () => Promise<Credential>): Promise<Credential> {
    const { kind, tokens: sourceTokens } = source
    if (!sourceTokens) return { kind, budget: source.budget, token: source.token }
    const current = await sourceTokens.current()
    const renew =
      reissue &&
      (() => {
        sourceTokens.refused(current)
        return reissue()
      })
    return { kind, budget: source.budget, token: current, renew }
  }

  const issueDefault = () => issue(fallback, () => issue(fallback))

  /** The credential of `login`'s installation `id`; the default's once GitHub will not mint for it. */
  async function issueForAccount(publicApp: PublicAppAccounts, login: string, id: string, log: FastifyBaseLogger, renewable: boolean): Promise<Credential> {
    const source: Source = { kind: 'app-account', budget: publicApp.pool.budgetOf(id), tokens: publicApp.pool.tokensOf(id) }
    try {
      return await issue(source, renewable ? () => issueForAccount(publicApp, login, id, log, false) : undefined)
    } catch (error) {
      // Uninstalled or suspended without a webhook saying so: the account has no installation now.
      if (!(error instanceof InstallationUnavailable)) throw error
      gone(publicApp, login, id, log)
      return issueDefault()
    }
  }

  return {
    async credentialFor(account, log) {
      if (!accounts || account === undefined) return issueDefault()
      const id = await accounts.lookup.installationOf(account, log)
      if (id === undefined || id === accounts.defaultInstallation) return issueDefault()
      return issueForAccount(accounts, account, id, log, true)
    },
    // Every credential this process holds: the upstream may echo one in what a failure repeats.
    redact: (message) =>
      [token ?? '', ...(tokens?.secrets() ?? []), ...(accounts?.pool.secrets() ?? [])].reduce((said, secret) => (secret ? said.replaceAll(secret, '[redacted]') : said), message),
    defaultInstallationOwner: async () => tokens?.owner(),
    forgetDefaultToken: () => tokens?.forget(),
    installationsChanged({ accounts: changes, forget }) {
      accounts?.lookup.apply(changes)
      for (const id of forget) accounts?.pool.forget(id)
    },
    recordInstallations: async (changes) => accounts?.lookup.record(changes),
  }
}

/** The one installation calls go with by default: the App's, or a public App's default when it has one. */
function defaultInstallationOf(configured: UpstreamCredentials): AppCredentials | undefined {
  if (configured.kind === 'app') return configured
  if (configured.kind !== 'public-app' || configured.defaultInstallationId === undefined) return undefined
  return { appId: configured.appId, installationId: configured.defaultInstallationId, privateKey: configured.privateKey }
}

function publicAppAccounts(options: CredentialsOptions, { appId, privateKey, defaultInstallationId }: PublicAppCredentials): PublicAppAccounts {
  const { now, store, logger, send, reserve } = options
  return {
    lookup: createInstallationLookup({ appId, privateKey, send, store, now, onLookup: options.metrics?.observeLookup }),
    pool: createInstallationPool({ appId, privateKey, send, now, logger, store, reserve }),
    defaultInstallation: defaultInstallationId,
  }
}

/** GitHub would not mint for `login`'s installation `id`: it is remembered as none, and its token forgotten. */
function gone({ lookup, pool }: PublicAppAccounts, login: string, id: string, log: FastifyBaseLogger): void {
  log.info({ githubApp: { installation: id } }, "GitHub App installation gone or suspended; the account's calls go with the default credential")
  const changes = [{ login, installation: null }]
  lookup.apply(changes)
  pool.forget(id)
  // Best effort: without Redis, the next replica to find out does the same.
  lookup.record(changes).catch(() => undefined)
}
