import type { KeyObject } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import { parseJson } from '../parse-json.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import { storedEntries } from '../shared-cache/stored.ts'
import { signAppJwt, type AppRequest } from './app-calls.ts'

/**
 * Which installation of a public App each account has (docs/github-app.md, "How an account's
 * installation is found, and the tokens"): looked up with the App's JWT, remembered (in Redis with
 * one), and kept exact by the `installation` webhooks.
 */

/**
 * How long an account's installation, once looked up, is trusted without a webhook saying
 * otherwise (docs/github-app.md, "A public App"). The `installation` webhooks keep it exact; these
 * bound how long a missed delivery can mislead: an install is noticed within an hour, an
 * uninstall the upstream refuses to mint for at once.
 */
export const INSTALLED_FOR_MS = 24 * 60 * 60 * 1000
export const NOT_INSTALLED_FOR_MS = 60 * 60 * 1000
/** Accounts whose installation one process remembers without a shared Redis. */
const REMEMBERED_ACCOUNTS = 50_000

/** `GET /users/{login}/installation` (200): the installation, suspended or not. */
const UserInstallation = TypeCompiler.Compile(Type.Object({ id: Type.Integer(), suspended_at: Type.Optional(Type.Union([Type.String(), Type.Null()])) }))

/** What a webhook says of one account: it has installation `installation` now, or none (null). */
export interface AccountChange {
  login: string
  installation: string | null
}

/** What became of one lookup, as `forge_app_installation_lookups_total{outcome}` counts it. */
export type LookupOutcome = 'installed' | 'not_installed' | 'failed'

export interface InstallationLookupOptions {
  appId: string
  privateKey: KeyObject
  /** Sends one call with the App's JWT (not an installation's token: it spends no installation's quota). */
  send: AppRequest
  /** Where replicas share what is known of each account; absent, this process remembers it alone. */
  store?: SharedStore | undefined
  now: () => number
  onLookup?: ((outcome: LookupOutcome) => void) | undefined
}

/** Which installation of a public App each account has. */
export interface InstallationLookup {
  /**
   * The live installation of `login`'s account, or undefined when it has none, a suspended one,
   * or the upstream cannot tell now. Remembered, in Redis when there is one; looked up with the
   * App's JWT otherwise, one lookup at a time per account.
   */
  installationOf(login: string, log: FastifyBaseLogger): Promise<string | undefined>
  /** What a webhook said, in this process only (every replica hears it). */
  apply(changes: readonly AccountChange[]): void
  /** What a webhook said, for every replica: written to Redis; rejects when it could not be. */
  record(changes: readonly AccountChange[]): Promise<void>
}

/** The lookup of `appId`'s installations: one call at a time per account, each answer remembered for its lifetime. */
export function createInstallationLookup({ appId, privateKey, send, store, now, onLookup }: InstallationLookupOptions): InstallationLookup {
  const local = new LRUCache<string, { id: string | null; until: number }>({ max: REMEMBERED_ACCOUNTS })
  const asking = new Map<string, Promise<string | undefined>>()
  const keyOf = (login: string) => `installation:${login.toLowerCase()}`

  function rememberHere(login: string, id: string | null, forMs: number): void {
    local.set(keyOf(login), { id, until: now() + forMs })
  }
  const lifetime = (id: string | null) => (id === null ? NOT_INSTALLED_FOR_MS : INSTALLED_FOR_MS)

  /** What this process or Redis knows: Redis first, as every replica's webhooks write there. */
  async function known(login: string): Promise<{ id: string | null } | undefined> {
    const shared = await store?.get(storedEntries.installation, keyOf(login))
    if (shared) return shared
    const entry = local.get(keyOf(login))
    return entry && entry.until > now() ? entry : undefined
  }

  async function lookUp(login: string, log: FastifyBaseLogger): Promise<string | undefined> {
    const authorization = `Bearer ${signAppJwt(appId, privateKey, now())}`
    const { statusCode, text } = await send({ method: 'GET', path: `/users/${encodeURIComponent(login)}/installation`, authorization }).catch(() => ({ statusCode: 0, text: '' }))
    const body = statusCode === 200 ? parseJson(text) : undefined
    if (statusCode !== 404 && !UserInstallation.Check(body)) {
      // Not remembered: the next request asks again. The upstream's words are not repeated.
      onLookup?.('failed')
      log.warn({ githubApp: { lookup: statusCode } }, "could not tell whether the account installed the GitHub App; calling with the default credential")
      return undefined
    }
    const id = UserInstallation.Check(body) && !body.suspended_at ? String(body.id) : null
    onLookup?.(id === null ? 'not_installed' : 'installed')
    rememberHere(login, id, lifetime(id))
    await store?.set(keyOf(login), JSON.stringify({ id }), lifetime(id))
    return id ?? undefined
  }

  return {
    async installationOf(login, log) {
      const remembered = await known(login)
      if (remembered) return remembered.id ?? undefined
      let lookup = asking.get(login.toLowerCase())
      if (!lookup) {
        lookup = lookUp(login, log).finally(() => asking.delete(login.toLowerCase()))
        asking.set(login.toLowerCase(), lookup)
      }
      return lookup
    },
    apply(changes) {
      for (const { login, installation } of changes) rememberHere(login, installation, lifetime(installation))
    },
    async record(changes) {
      if (!store) return
      await Promise.all(changes.map(({ login, installation }) => store.write(keyOf(login), JSON.stringify({ id: installation }), lifetime(installation))))
    },
  }
}
