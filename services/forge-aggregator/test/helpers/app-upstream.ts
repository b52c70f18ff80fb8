// The one fake GitHub App of the tests: its endpoints (installation lookup, token mint,
// installation), the installations it has and the tokens it gave out. A test meets it as a server
// on 127.0.0.1 (`startAppUpstream`: a private App, or a public one with `{ public: true }`), or,
// in the credential modes the nock-based tests run in, through nock (`buildInMode`): the same App,
// so that there is one place to learn how the fake GitHub App behaves.
import { generateKeyPairSync, randomBytes, verify } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Test } from 'tap'
import nock from 'nock'
import { startLocalUpstream } from './local-upstream.ts'
import { buildAggregator, testClock, type BuildOptions, type TestAggregator, type TestClock, type TestEnv } from './build.ts'
import { API, makeFollowers, makeRepo, makeRepos, makeUser, searchesEndWith, searchResult } from './upstream.ts'

export const APP_ID = '424242'
/** The private App's installation, and the default installation (`FORGE_APP_INSTALLATION_ID`) of the credential modes. */
export const INSTALLATION_ID = '9001'
/** GitHub's installation tokens live an hour. */
export const TOKEN_LIFETIME_MS = 60 * 60 * 1000

// One key for every fake of a run: generating an RSA key costs each test tens of milliseconds.
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string

/** One installation: whose account, on which repositories, and what is left of its quota (GitHub's: 5,000 core an hour, 30 searches a minute). */
export interface FakeInstallation {
  login: string
  selection: 'all' | 'selected'
  suspended: boolean
  core: number
  search: number
}

/** An installation on `login`'s account, its quota whole. */
export const installationOn = (login: string): FakeInstallation => ({ login, selection: 'all', suspended: false, core: 5000, search: 30 })

/** One request the fake GitHub received, as the tests read it. */
export interface SeenRequest {
  method: string
  path: string
  authorization: string
  ifNoneMatch: string | undefined
}

/** One call the fake GitHub answered about an account: with whose credential, and what for. */
export interface ChargedCall {
  /** `installation <id>`, or `anonymous`. */
  credential: string
  path: string
  status: number
}

/** The App as GitHub keeps it, whichever way a test reaches it. */
export interface FakeApp {
  /** Installations by id; a test adds, deletes, suspends one or spends its quota. */
  installations: Map<string, FakeInstallation>
  /** The installation a lookup answers for an account with none of its own; none (404) when undefined. */
  everyAccount: string | undefined
  /** Logins whose installation was looked up with the JWT, in order. */
  lookups: string[]
  /** When set, every lookup is answered this status (GitHub in trouble). */
  lookupStatus: number | undefined
  /** Installation tokens issued, in order. */
  minted: string[]
  /** The installation of each token of `minted`. */
  mints: string[]
  /** Every JWT it was sent. */
  jwts: string[]
  /** When set, the body of the token endpoint's 201 instead of a token. */
  mintBody: string | undefined
  /** Every installation token is refused (401), however fresh. */
  refuseTokens: boolean
  /** The upstream stops accepting `token` (an administrator revoked it). */
  revoke(token: string): void
  /** The tokens minted for `installation`, in order. */
  tokensOf(installation: string): string[]
  /** Every secret the fake gave out or was sent: tokens and JWTs. */
  secrets(): string[]
}

/** What the fake answers a request. */
interface Answer {
  status: number
  body?: unknown
  /** Sent as it is, not as JSON. */
  raw?: string
  headers?: Record<string, string>
}

/** The credential a call is judged to carry: whose quota it spends. */
interface Credential {
  name: string
  quota: Pick<FakeInstallation, 'core' | 'search'>
  /** Undefined without a token. */
  installation: FakeInstallation | undefined
}

interface FakeAppCore {
  app: FakeApp
  /** The answer of an App endpoint (`/app/…`, `/users/{login}/installation`). */
  answerApp: (method: string, path: string, authorization: string) => Answer
  /** The credential of an account call sent now with `authorization`; undefined when refused. */
  judge: (authorization: string) => Credential | undefined
}

/** The App's own calls, with its JWT: they spend the App's quota, not the installation's. */
export const isAppCall = (path: string): boolean => path.startsWith('/app/') || /^\/users\/[^/]+\/installation$/.test(path)

/** Whether GitHub would take `jwt` now: signed with the App's key, `iss` the App, `iat` in the past (60 s is its advice), `exp` no more than 10 minutes ahead. */
function isValidJwt(jwt: string, clock: TestClock): boolean {
  const [header, claims, signature] = jwt.split('.')
  if (!header || !claims || !signature) return false
  if (!verify('sha256', Buffer.from(`${header}.${claims}`), publicKey, Buffer.from(signature, 'base64url'))) return false
  const { alg } = JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg?: string }
  const { iat, exp, iss } = JSON.parse(Buffer.from(claims, 'base64url').toString()) as { iat: number; exp: number; iss: string }
  const now = clock.now() / 1000
  return alg === 'RS256' && iss === APP_ID && iat <= now - 30 && iat >= now - 90 && exp > now && exp <= now + 600
}

/** GitHub App state on `clock`: no installation until a test adds one. */
function createFakeApp(clock: TestClock): FakeAppCore {
  /** Live tokens: their installation and expiry. */
  const live = new Map<string, { installation: string; expiresAt: number }>()
  const app: FakeApp = {
    installations: new Map(),
    everyAccount: undefined,
    lookups: [],
    lookupStatus: undefined,
    minted: [],
    mints: [],
    jwts: [],
    mintBody: undefined,
    refuseTokens: false,
    revoke: (token) => live.delete(token),
    tokensOf: (installation) => app.minted.filter((_, index) => app.mints[index] === installation),
    secrets: () => [...app.minted, ...app.jwts],
  }

  function lookUp(login: string, authorization: string): Answer {
    app.lookups.push(login)
    if (app.lookupStatus !== undefined) return { status: app.lookupStatus, body: { message: `Server Error for ${authorization}` } }
    const own = [...app.installations.entries()].find(([, installation]) => installation.login.toLowerCase() === login.toLowerCase())
    const [id, installation] = own ?? [app.everyAccount, app.everyAccount === undefined ? undefined : app.installations.get(app.everyAccount)]
    if (id === undefined || !installation) return { status: 404, body: { message: 'Not Found' } }
    return { status: 200, body: { id: Number(id), account: { login: own ? installation.login : login }, suspended_at: installation.suspended ? '2026-01-01T00:00:00Z' : null } }
  }

  function mint(id: string, installation: FakeInstallation): Answer {
    if (installation.suspended) return { status: 403, body: { message: 'This installation has been suspended' } }
    if (app.mintBody !== undefined) return { status: 201, raw: app.mintBody }
    const token = `ghs_${randomBytes(18).toString('hex')}`
    const expiresAt = clock.now() + TOKEN_LIFETIME_MS
    live.set(token, { installation: id, expiresAt })
    app.minted.push(token)
    app.mints.push(id)
    // GitHub's format: whole seconds, UTC.
    return { status: 201, body: { token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'), repository_selection: 'all' } }
  }

  function answerApp(method: string, path: string, authorization: string): Answer {
    const jwt = authorization.replace(/^Bearer /, '')
    app.jwts.push(jwt)
    if (!isValidJwt(jwt, clock)) return { status: 401, body: { message: `A JSON web token could not be decoded: ${authorization}` } }
    const login = /^\/users\/([^/]+)\/installation$/.exec(path)?.[1]
    if (method === 'GET' && login !== undefined) return lookUp(decodeURIComponent(login), authorization)
    const [, id, tokens] = /^\/app\/installations\/(\d+)(\/access_tokens)?$/.exec(path) ?? []
    const installation = id === undefined ? undefined : app.installations.get(id)
    if (!installation) return { status: 404, body: { message: 'Not Found' } }
    if (method === 'POST' && tokens) return mint(id!, installation)
    if (method === 'GET' && !tokens) return { status: 200, body: { id: Number(id), account: { login: installation.login }, repository_selection: installation.selection } }
    return { status: 404, body: { message: 'Not Found' } }
  }

  // GitHub's quotas for calls without a token, per address.
  const anonymous: Credential = { name: 'anonymous', quota: { core: 60, search: 10 }, installation: undefined }
  function judge(authorization: string): Credential | undefined {
    if (authorization === '') return anonymous
    const held = live.get(authorization.replace(/^Bearer /, ''))
    const installation = held && app.installations.get(held.installation)
    if (app.refuseTokens || !held || !installation || installation.suspended || clock.now() >= held.expiresAt) return undefined
    return { name: `installation ${held.installation}`, quota: installation, installation }
  }

  return { app, answerApp, judge }
}

export interface AppUpstream extends FakeApp {
  url: string
  /** The App's variables, key inline (PEM), upstream at this server; a public App's name no installation (a test adds `FORGE_APP_INSTALLATION_ID`). */
  env: TestEnv
  /** Every request, App endpoints included, in order. */
  requests: SeenRequest[]
  /** Non-App requests (the service's own calls, not `isAppCall`), as `path`. */
  calls(): string[]
  /** Every non-App call whose credential was taken, charged to it, in order. */
  charged: ChargedCall[]
  /** Stars of each repository of an owner, by login: what a star changes upstream (the fixture's count otherwise). */
  stars: Record<string, number>
  /** Rate-limit headers sent with every call's answer, whatever was spent; none: each credential's quota is counted down and its headers sent. */
  rateLimit: Record<string, string>
  /** When set, every call with a live token is answered this status, its message quoting the token and the last JWT (a gateway echoing the request). */
  failWith: number | undefined
  /**
   * Non-App calls that `matches` are answered only once `until` settles. Their token is judged when
   * they arrive, as GitHub does with a request it has accepted: one revoked meanwhile is still
   * answered as its request would have been then, `failWith` as it is when the answer goes.
   */
  holdAnswers(matches: (request: SeenRequest) => boolean, until: Promise<unknown>): void
  /** Paths of the calls held so far (`holdAnswers`), as they arrived. */
  heldCalls: string[]
  /** Resolves once a request that `matches` has arrived (one already received included). */
  untilRequested(matches: (request: SeenRequest) => boolean): Promise<void>
  /** Calls per credential and kind of path, as the closing note's table prints them. */
  table(): string
}

function send(response: ServerResponse, answer: Answer): void {
  if (answer.raw !== undefined) return void response.writeHead(answer.status, answer.headers).end(answer.raw)
  if (answer.body === undefined) return void response.writeHead(answer.status, answer.headers).end()
  response.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', ...answer.headers }).end(JSON.stringify(answer.body))
}

/** `/users/alice/repos?…` → `/users/{login}/repos`: the table's rows. */
function kindOfPath(path: string): string {
  if (path.startsWith('/search/issues')) return /is%3Apr|is:pr/.test(path) ? 'search is:pr' : 'search is:issue'
  return path.replace(/\?.*$/, '').replace(/^\/users\/[^/]+/, '/users/{login}')
}

function callTable(charged: readonly ChargedCall[]): string {
  const credentials = [...new Set(charged.map((call) => call.credential))].sort()
  const kinds = [...new Set(charged.map((call) => kindOfPath(call.path)))].sort()
  const logins = (credential: string) => [...new Set(charged.filter((call) => call.credential === credential).map((call) => /^\/users\/([^/?]+)/.exec(call.path)?.[1] ?? /author%3A([^+&]+)/.exec(call.path)?.[1]))].sort()
  const rows = credentials.map((credential) => {
    const counts = kinds.map((kind) => charged.filter((call) => call.credential === credential && kindOfPath(call.path) === kind).length)
    return `| ${credential} | ${logins(credential).join(', ')} | ${counts.join(' | ')} | ${counts.reduce((a, b) => a + b, 0)} |`
  })
  return [`| credential | accounts | ${kinds.join(' | ')} | total |`, `|---|---|${kinds.map(() => '---|').join('')}---|`, ...rows].join('\n')
}

/** The server's side of the fake, before it has an address. */
type FakeServer = Omit<AppUpstream, 'url' | 'env'>

/** What GitHub answers an account call: its fixtures, with an ETag (304 on a match); `/installation/repositories`, those of the token's installation. */
function accountAnswer(upstream: FakeServer, url: URL, ifNoneMatch: string | undefined, installation: FakeInstallation | undefined): Answer {
  const withEtag = (body: unknown): Answer => {
    const etag = `"${Buffer.from(JSON.stringify(body)).length}"`
    return ifNoneMatch === etag ? { status: 304, headers: { etag } } : { status: 200, body, headers: { etag } }
  }
  const user = /^\/users\/([^/]+)$/.exec(url.pathname)?.[1]
  if (user) return withEtag(makeUser(user, { public_repos: 2 }))
  const owner = /^\/users\/([^/]+)\/repos$/.exec(url.pathname)?.[1]
  const stars = owner === undefined ? undefined : upstream.stars[owner]
  if (owner) return withEtag(makeRepos(owner, 2, () => (stars === undefined ? {} : { stargazers_count: stars })))
  if (/^\/users\/[^/]+\/followers$/.test(url.pathname)) return withEtag(makeFollowers(2))
  if (url.pathname === '/search/issues') return { status: 200, body: searchResult(5) }
  if (url.pathname === '/installation/repositories' && installation) {
    // 101 repositories over two pages, in no order: one never updated, the most recent on page 2.
    const login = installation.login
    const first = [
      makeRepo(login, 'never', { updated_at: null }),
      ...makeRepos(login, 98, (index) => ({ updated_at: `2020-01-01T00:00:${String(index % 60).padStart(2, '0')}Z` })),
      makeRepo(login, 'recent', { updated_at: '2023-01-01T00:00:00Z' }),
    ]
    const second = [makeRepo(login, 'secret', { private: true, updated_at: '2024-06-01T00:00:00Z' })]
    return { status: 200, body: { total_count: 101, repositories: url.searchParams.get('page') === '2' ? second : first } }
  }
  return { status: 404, body: { message: 'Not Found' } }
}

/**
 * A call judged to carry `credential` (undefined: refused). Unless a test set the rate-limit headers,
 * it is charged to the credential's quota: 403 with `X-RateLimit-Remaining: 0` once spent.
 */
function chargedAnswer(upstream: FakeServer, clock: TestClock, seen: SeenRequest, credential: Credential | undefined): Answer {
  if (!credential) return { status: 401, body: { message: `Bad credentials: ${seen.authorization}` } }
  const url = new URL(seen.path, 'http://localhost')
  const resource = url.pathname.startsWith('/search/') ? 'search' : 'core'
  const counted = Object.keys(upstream.rateLimit).length === 0
  const left = counted ? credential.quota[resource] : Infinity
  upstream.charged.push({ credential: credential.name, path: seen.path, status: left <= 0 ? 403 : 200 })
  if (counted) credential.quota[resource] = Math.max(left - 1, 0)
  const limits = credential.installation ? { search: 30, core: 5000 } : { search: 10, core: 60 }
  const quotaHeaders = {
    'x-ratelimit-limit': String(limits[resource]),
    'x-ratelimit-remaining': String(credential.quota[resource]),
    'x-ratelimit-reset': String(Math.floor(clock.now() / 1000) + (resource === 'search' ? 60 : 3600)),
  }
  const headers = { ...(counted ? quotaHeaders : upstream.rateLimit), 'x-ratelimit-resource': resource }
  if (left <= 0) return { status: 403, body: { message: `API rate limit exceeded for ${seen.authorization || 'you'}` }, headers }
  // A gateway in trouble answers, not GitHub: no rate-limit headers.
  if (upstream.failWith !== undefined) {
    return { status: upstream.failWith, body: { message: `Upstream trouble with ${seen.authorization} (App JWT ${upstream.jwts.at(-1) ?? 'none'})` } }
  }
  const answer = accountAnswer(upstream, url, seen.ifNoneMatch, credential.installation)
  return { ...answer, headers: { ...headers, ...answer.headers } }
}

const hasPinnedHeaders = (request: IncomingMessage): boolean =>
  request.headers.accept === 'application/vnd.github+json' && request.headers['x-github-api-version'] === '2022-11-28' && !!request.headers['user-agent']

/**
 * GitHub as a GitHub App sees it, on 127.0.0.1. A private App: one installation (`INSTALLATION_ID`,
 * on `mona`, on whose installation every account also is, for a public App's lookups), answering
 * with the rate-limit headers a test sets. A public App (`public`): the installations a test adds,
 * each on one account with a quota of its own that every call counts down. The App's endpoints take
 * only a JWT that GitHub would accept on `clock`; installation tokens live an hour and are refused
 * (401) once expired, revoked, or their installation gone; calls without a token spend a quota of
 * their own. Its failures quote the credentials, as a gateway that echoes the request does, so that a
 * service that repeats them unredacted shows it.
 */
export async function startAppUpstream(t: Test, clock: TestClock, options: { public?: boolean } = {}): Promise<AppUpstream> {
  const { app, answerApp, judge } = createFakeApp(clock)
  const holds: Array<{ matches: (request: SeenRequest) => boolean; until: Promise<unknown> }> = []
  const arrivals = new Set<(request: SeenRequest) => void>()
  if (!options.public) {
    app.installations.set(INSTALLATION_ID, installationOn('mona'))
    app.everyAccount = INSTALLATION_ID
  }
  const resetAt = String(Math.floor(clock.now() / 1000) + 3600)
  const upstream: FakeServer = Object.assign(app, {
    requests: [] as SeenRequest[],
    calls: () => upstream.requests.filter((request) => !isAppCall(request.path)).map((request) => request.path),
    charged: [] as ChargedCall[],
    stars: {},
    rateLimit: options.public ? {} : { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': resetAt },
    failWith: undefined,
    holdAnswers: (matches: (request: SeenRequest) => boolean, until: Promise<unknown>) => void holds.push({ matches, until }),
    heldCalls: [] as string[],
    untilRequested: (matches: (request: SeenRequest) => boolean) =>
      new Promise<void>((resolve) => {
        if (upstream.requests.some(matches)) return resolve()
        const check = (request: SeenRequest) => {
          if (!matches(request)) return
          arrivals.delete(check)
          resolve()
        }
        arrivals.add(check)
      }),
    table: () => callTable(upstream.charged),
  })

  const server = await startLocalUpstream(t, (request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost')
    const seen = { method: request.method ?? '', path: url.pathname + url.search, authorization: request.headers.authorization ?? '', ifNoneMatch: request.headers['if-none-match'] }
    upstream.requests.push(seen)
    for (const arrival of arrivals) arrival(seen)
    if (!hasPinnedHeaders(request)) return send(response, { status: 400, body: { message: 'missing the pinned headers' } })
    if (isAppCall(url.pathname)) return send(response, answerApp(seen.method, url.pathname, seen.authorization))
    const credential = judge(seen.authorization)
    const held = holds.filter((hold) => hold.matches(seen)).map((hold) => hold.until)
    if (held.length === 0) return send(response, chargedAnswer(upstream, clock, seen, credential))
    upstream.heldCalls.push(seen.path)
    void Promise.allSettled(held).then(() => send(response, chargedAnswer(upstream, clock, seen, credential)))
  })
  const installation = options.public ? { FORGE_APP_PUBLIC: 'true' } : { FORGE_APP_INSTALLATION_ID: INSTALLATION_ID }
  const env: TestEnv = { FORGE_API_URL: server.url, FORGE_APP_ID: APP_ID, FORGE_APP_PRIVATE_KEY: privateKeyPem, ...installation }
  return Object.assign(upstream, { url: server.url, env })
}

/**
 * The credential modes the conformance and economy tests run in, against nock's API. A public App's
 * own calls, the lookups and the token mint, are the fake App's, answered through nock; they go
 * with the App's JWT and spend the App's quota, not the account's, so a test's `scope.done()` and
 * `recordUnexpectedCalls` (the account's calls) are the same in every mode. What a mode adds is
 * one lookup per account not known yet and one mint per installation (per process, per hour):
 * `appCalls` has them, for a test to check.
 */
export interface CredentialMode {
  name: string
  env: TestEnv
  /** The installation the lookup answers for every account; none (404) when undefined. */
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

/** The installation of every account the tests name, in the installed mode: one, so that a budget a test spends is the one its other accounts share, as in the other modes. */
export const ACCOUNT_INSTALLATION = '7007'
/** `FORGE_APP_INSTALLATION_ID`: the accounts without an installation of their own, and `repos`. */
export const DEFAULT_INSTALLATION = INSTALLATION_ID

const publicApp: TestEnv = { FORGE_APP_PUBLIC: 'true', FORGE_APP_ID: APP_ID, FORGE_APP_PRIVATE_KEY: privateKeyPem }

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

const CREDENTIAL_KINDS = ['anonymous', 'token', 'app-default', 'app-account']

/** The fake App of `mode` on `clock`: the default installation on the operator's account (not the owner's), and the account installation on every account. */
function modeApp(mode: CredentialMode, clock: TestClock): FakeAppCore {
  const core = createFakeApp(clock)
  core.app.installations.set(DEFAULT_INSTALLATION, installationOn('forge-operator'))
  if (mode.accountInstallation === undefined) return core
  // A login GitHub never gives: this installation is found only as every account's.
  core.app.installations.set(mode.accountInstallation, installationOn('every account'))
  core.app.everyAccount = mode.accountInstallation
  return core
}

/** `buildAggregator` in `mode`: its variables over `options.env`, the App's calls answered by the fake App through nock. */
export async function buildInMode(t: Test, mode: CredentialMode, options: BuildOptions = {}): Promise<ModeAggregator> {
  const clock = options.clock ?? testClock()
  const { app, answerApp } = modeApp(mode, clock)
  // nock 15 hands a reply function the request (a fetch `Request`), though its types still say the path.
  const reply = (request: unknown): nock.ReplyFnResult => {
    const { method, url, headers } = request as Request
    const answer = answerApp(method, new URL(url).pathname, headers.get('authorization') ?? '')
    return [answer.status, (answer.raw ?? answer.body) as nock.ReplyBody]
  }
  const answerAppCalls = () => {
    if (!mode.looksUp) return
    nock(API).get(/^\/users\/[^/]+\/installation$/).reply(reply).persist()
    nock(API).post(/^\/app\/installations\/\d+\/access_tokens$/).reply(reply).persist()
    nock(API).get(/^\/app\/installations\/\d+$/).reply(reply).persist()
  }
  answerAppCalls()
  searchesEndWith(mode.looksUp ? ' is:public' : '')
  t.teardown(() => searchesEndWith(''))
  const aggregator = await buildAggregator(t, { ...options, clock, env: { ...mode.env, ...options.env } })
  return {
    ...aggregator,
    appCalls: { lookups: app.lookups, mints: app.mints },
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
