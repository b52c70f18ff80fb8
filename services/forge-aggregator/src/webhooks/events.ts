import { Type, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { InstallationChanges } from '../credentials/credentials.ts'

/**
 * What each webhook event changes (docs/webhooks.md, "What a delivery drops"): the answers it
 * drops, and the credentials it changes.
 */

/**
 * What one delivery drops (docs/webhooks.md, "What a delivery drops"): the cache keys of the
 * answers it changes (as the routes name them: `users/<login>`, `repos/<owner>`,
 * `repo/<owner>/<name>`, lower case), and whether the installation token goes too.
 */
export interface Drops {
  /** The account the delivery is about, for the log line: a login, never more of the payload. */
  owner: string | undefined
  keys: string[]
  /** Whether the default installation's token goes (it was deleted or suspended). */
  forgetsDefaultToken: boolean
  /** A public App's installation changes: what every replica applies (`InstallationChanges`). */
  installations?: InstallationChanges
}

/** The events this service acts on, and `ping`, which GitHub sends when a webhook is set up. */
export const KNOWN_EVENTS = ['star', 'fork', 'repository', 'push', 'issues', 'pull_request', 'installation', 'installation_target', 'ping'] as const

/** The `event` label of a delivery: a known event's name, else `other`, so a caller cannot grow the series. */
export function eventLabel(event: string | undefined): string {
  return (KNOWN_EVENTS as readonly (string | undefined)[]).includes(event) ? event! : 'other'
}

// Only the fields read are checked; GitHub's payloads carry many more.
const Account = Type.Object({ login: Type.String({ minLength: 1 }) })
const Repository = Type.Object({ name: Type.String({ minLength: 1 }), owner: Account })

const compile = <Schema extends TSchema>(schema: Schema) => TypeCompiler.Compile(schema)
const RepositoryPayload = compile(
  Type.Object({
    action: Type.Optional(Type.String()),
    repository: Repository,
    // `repository` renamed: the old name; transferred: the old owner, a user or an organization.
    changes: Type.Optional(
      Type.Object({
        repository: Type.Optional(Type.Object({ name: Type.Object({ from: Type.String({ minLength: 1 }) }) })),
        owner: Type.Optional(Type.Object({ from: Type.Object({ user: Type.Optional(Account), organization: Type.Optional(Account) }) })),
      }),
    ),
  }),
)
const ForkPayload = compile(Type.Object({ repository: Repository, forkee: Repository }))
const IssuePayload = compile(Type.Object({ action: Type.String(), issue: Type.Object({ user: Account }) }))
const PullRequestPayload = compile(Type.Object({ action: Type.String(), pull_request: Type.Object({ user: Account }) }))
const InstallationPayload = compile(Type.Object({ action: Type.String(), installation: Type.Object({ id: Type.Integer() }) }))
const InstallationOnAccountPayload = compile(Type.Object({ action: Type.String(), installation: Type.Object({ id: Type.Integer(), account: Account }) }))
/** An account that installed the App renamed: its installation, its new login and its old one. */
const RenamedPayload = compile(
  Type.Object({
    action: Type.Literal('renamed'),
    installation: Type.Object({ id: Type.Integer() }),
    account: Account,
    changes: Type.Object({ login: Type.Object({ from: Type.String({ minLength: 1 }) }) }),
  }),
)

/** Star counts, the repositories listed and their order (updated, pushed), names and owners. */
const REPOSITORY_EVENTS: ReadonlySet<string> = new Set(['star', 'push', 'repository'])
/** The search counts count issues and pull requests by author, open or closed. */
const ISSUE_ACTIONS: ReadonlySet<string> = new Set(['opened', 'closed', 'reopened', 'deleted', 'transferred'])
const PULL_REQUEST_ACTIONS: ReadonlySet<string> = new Set(['opened', 'closed', 'reopened'])
const INSTALLATION_ACTIONS: ReadonlySet<string> = new Set(['deleted', 'suspend'])
/** A public App: the actions after which an account's installation is live. */
const LIVE_INSTALLATION_ACTIONS: ReadonlySet<string> = new Set(['created', 'unsuspend'])

/** An owner's answers and one repository's. */
function ownerKeys(owner: string, repository: string): string[] {
  const login = owner.toLowerCase()
  return [`users/${login}`, `repos/${login}`, `repo/${login}/${repository.toLowerCase()}`]
}

const answersOf = (owner: string, keys: string[]): Drops => ({ owner, keys: [...new Set(keys)], forgetsDefaultToken: false })

/**
 * The drops of a delivery of `event` with `payload` (parsed JSON), or undefined when it changes
 * nothing this service answers: an event or an action it does not use, a payload without the
 * fields it reads, another installation's events. `installationId` is `FORGE_APP_INSTALLATION_ID`;
 * with `publicApp` (`FORGE_APP_PUBLIC`), every installation's events count (`installationDrops`).
 */
export function dropsFor(event: string, payload: unknown, installationId: string | undefined, publicApp = false): Drops | undefined {
  if (publicApp && (event === 'installation' || event === 'installation_target')) return installationDrops(event, payload, installationId)
  if (REPOSITORY_EVENTS.has(event)) {
    if (!RepositoryPayload.Check(payload)) return undefined
    const { repository, changes } = payload
    const owner = repository.owner.login
    const keys = ownerKeys(owner, repository.name)
    const oldName = changes?.repository?.name.from
    if (oldName !== undefined) keys.push(...ownerKeys(owner, oldName))
    const oldOwner = changes?.owner?.from.user ?? changes?.owner?.from.organization
    if (oldOwner !== undefined) keys.push(...ownerKeys(oldOwner.login, repository.name))
    return answersOf(owner, keys)
  }
  if (event === 'fork') {
    if (!ForkPayload.Check(payload)) return undefined
    // The forked repository's counts, and the forker's own repositories (a fork counts in totalForks).
    const { repository, forkee } = payload
    return answersOf(repository.owner.login, [...ownerKeys(repository.owner.login, repository.name), ...ownerKeys(forkee.owner.login, forkee.name)])
  }
  if (event === 'issues' && IssuePayload.Check(payload) && ISSUE_ACTIONS.has(payload.action)) {
    return answersOf(payload.issue.user.login, [`users/${payload.issue.user.login.toLowerCase()}`])
  }
  if (event === 'pull_request' && PullRequestPayload.Check(payload) && PULL_REQUEST_ACTIONS.has(payload.action)) {
    return answersOf(payload.pull_request.user.login, [`users/${payload.pull_request.user.login.toLowerCase()}`])
  }
  if (event === 'installation' && InstallationPayload.Check(payload) && INSTALLATION_ACTIONS.has(payload.action)) {
    // An App may be installed on many accounts: only ours holds a token here.
    if (String(payload.installation.id) !== installationId) return undefined
    return { owner: undefined, keys: [], forgetsDefaultToken: true }
  }
  return undefined
}

/**
 * A public App's `installation` and `installation_target` deliveries (docs/webhooks.md): an account
 * installed it (or its installation was unsuspended), uninstalled or suspended it (its token goes;
 * the default's too when it is the default), or renamed itself (its answers under the old login go).
 */
function installationDrops(event: string, payload: unknown, installationId: string | undefined): Drops | undefined {
  if (event === 'installation_target') {
    if (!RenamedPayload.Check(payload)) return undefined
    const { account, changes } = payload
    const installation = String(payload.installation.id)
    const old = changes.login.from.toLowerCase()
    return {
      owner: account.login,
      keys: [`users/${old}`, `repos/${old}`],
      forgetsDefaultToken: false,
      installations: {
        accounts: [
          { login: changes.login.from, installation: null },
          { login: account.login, installation },
        ],
        forget: [],
      },
    }
  }
  if (!InstallationOnAccountPayload.Check(payload)) return undefined
  const { action } = payload
  const installation = String(payload.installation.id)
  const login = payload.installation.account.login
  if (LIVE_INSTALLATION_ACTIONS.has(action)) return { owner: login, keys: [], forgetsDefaultToken: false, installations: { accounts: [{ login, installation }], forget: [] } }
  if (!INSTALLATION_ACTIONS.has(action)) return undefined
  return {
    owner: login,
    keys: [],
    forgetsDefaultToken: installation === installationId,
    installations: { accounts: [{ login, installation: null }], forget: [installation] },
  }
}
