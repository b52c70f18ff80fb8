import { generateKeyPairSync, randomBytes, verify } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { Test } from 'tap'
import { startLocalUpstream } from './local-upstream.ts'
import type { TestClock, TestEnv } from './build.ts'
import { makeFollowers, makeRepos, makeUser, searchResult } from './upstream.ts'

export const PUBLIC_APP_ID = '515151'
/** GitHub's installation tokens live an hour. */
const TOKEN_LIFETIME_MS = 60 * 60 * 1000

/** One installation of the public App: whose account, and what is left of its quota (GitHub's: 5,000 core an hour, 30 searches a minute). */
export interface FakeInstallation {
  login: string
  suspended: boolean
  core: number
  search: number
}

/** One call the fake GitHub answered about an account: with whose credential, and what for. */
export interface ChargedCall {
  /** `installation <id>`, or `anonymous`. */
  credential: string
  path: string
  status: number
}

export interface PublicAppUpstream {
  url: string
  /** The public App's variables (no default installation: a test adds `FORGE_APP_INSTALLATION_ID`). */
  env: TestEnv
  /** Installations by id; a test adds, deletes, suspends one or spends its quota. */
  installations: Map<string, FakeInstallation>
  /** Every call that was not the App's own (`/app/…`, `/users/{login}/installation`), in order. */
  calls: ChargedCall[]
  /** Tokens minted, by installation id, in order. */
  minted: Map<string, string[]>
  /** Logins whose installation was looked up with the JWT, in order. */
  lookups: string[]
  /** When set, every lookup is answered this status (GitHub in trouble). */
  lookupStatus: number | undefined
  /** When set, every account call with a live token is answered this status, its message quoting the token (a gateway echoing the request). */
  failWith: number | undefined
  /**
   * Account calls whose path `matches` are answered only once `until` settles. Their token is
   * judged when they arrive, as GitHub does with a request it has accepted; `failWith` when the answer goes.
   */
  holdAnswers(matches: (path: string) => boolean, until: Promise<unknown>): void
  /** Paths of the calls held so far (`holdAnswers`), as they arrived. */
  heldCalls: string[]
  /** Every secret the fake gave out or was sent: tokens and JWTs. */
  secrets(): string[]
  /** Calls per credential and kind of path, as the closing note's table prints them. */
  table(): string
}

function json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(body))
}

/** `/users/alice/repos?…` → `/users/{login}/repos`: the table's rows. */
function kindOfPath(path: string): string {
  if (path.startsWith('/search/issues')) return /is%3Apr|is:pr/.test(path) ? 'search is:pr' : 'search is:issue'
  return path.replace(/\?.*$/, '').replace(/^\/users\/[^/]+/, '/users/{login}')
}

/**
 * GitHub as a public GitHub App sees it, on 127.0.0.1: any number of installations, each on one
 * account with a quota of its own, counted down by every call made with its token (403 with
 * `X-RateLimit-Remaining: 0` once spent); `GET /users/{login}/installation` and the token endpoint
 * take only a JWT of the App's key; anonymous calls spend a quota of their own. Failures quote the
 * credential they were sent, as a gateway that echoes the request does.
 */
export async function startPublicAppUpstream(t: Test, clock: TestClock): Promise<PublicAppUpstream> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  /** Live tokens: their installation and expiry. */
  const live = new Map<string, { installation: string; expiresAt: number }>()
  const jwts: string[] = []
  const anonymous: FakeInstallation = { login: '', suspended: false, core: 60, search: 10 }
  const holds: Array<{ matches: (path: string) => boolean; until: Promise<unknown> }> = []
  const upstream: Omit<PublicAppUpstream, 'url' | 'env'> = {
    installations: new Map(),
    calls: [],
    minted: new Map(),
    lookups: [],
    lookupStatus: undefined,
    failWith: undefined,
    holdAnswers: (matches, until) => void holds.push({ matches, until }),
    heldCalls: [],
    secrets: () => [...[...upstream.minted.values()].flat(), ...jwts],
    table() {
      const credentials = [...new Set(upstream.calls.map((call) => call.credential))].sort()
      const kinds = [...new Set(upstream.calls.map((call) => kindOfPath(call.path)))].sort()
      const logins = (credential: string) => [...new Set(upstream.calls.filter((call) => call.credential === credential).map((call) => /^\/users\/([^/?]+)/.exec(call.path)?.[1] ?? /author%3A([^+&]+)/.exec(call.path)?.[1]))].sort()
      const rows = credentials.map((credential) => {
        const counts = kinds.map((kind) => upstream.calls.filter((call) => call.credential === credential && kindOfPath(call.path) === kind).length)
        return `| ${credential} | ${logins(credential).join(', ')} | ${counts.join(' | ')} | ${counts.reduce((a, b) => a + b, 0)} |`
      })
      return [`| credential | accounts | ${kinds.join(' | ')} | total |`, `|---|---|${kinds.map(() => '---|').join('')}---|`, ...rows].join('\n')
    },
  }

  function isAppJwt(authorization: string): boolean {
    const jwt = authorization.replace(/^Bearer /, '')
    jwts.push(jwt)
    const [header, claims, signature] = jwt.split('.')
    if (!header || !claims || !signature) return false
    if (!verify('sha256', Buffer.from(`${header}.${claims}`), publicKey, Buffer.from(signature, 'base64url'))) return false
    const { iss, exp } = JSON.parse(Buffer.from(claims, 'base64url').toString()) as { iss: string; exp: number }
    return iss === PUBLIC_APP_ID && exp > clock.now() / 1000
  }

  function answerApp(method: string, path: string, authorization: string, response: ServerResponse): void {
    if (!isAppJwt(authorization)) return json(response, 401, { message: `A JSON web token could not be decoded: ${authorization}` })
    const login = /^\/users\/([^/]+)\/installation$/.exec(path)?.[1]
    if (method === 'GET' && login !== undefined) {
      upstream.lookups.push(login)
      if (upstream.lookupStatus !== undefined) return json(response, upstream.lookupStatus, { message: `Server Error for ${authorization}` })
      const found = [...upstream.installations.entries()].find(([, installation]) => installation.login.toLowerCase() === login.toLowerCase())
      if (!found) return json(response, 404, { message: 'Not Found' })
      const [id, installation] = found
      return json(response, 200, { id: Number(id), account: { login: installation.login }, suspended_at: installation.suspended ? '2026-01-01T00:00:00Z' : null })
    }
    const minting = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path)?.[1]
    const installation = minting === undefined ? undefined : upstream.installations.get(minting)
    if (method !== 'POST' || minting === undefined || !installation) return json(response, 404, { message: 'Not Found' })
    if (installation.suspended) return json(response, 403, { message: 'This installation has been suspended' })
    const token = `ghs_${randomBytes(18).toString('hex')}`
    const expiresAt = clock.now() + TOKEN_LIFETIME_MS
    live.set(token, { installation: minting, expiresAt })
    upstream.minted.set(minting, [...(upstream.minted.get(minting) ?? []), token])
    json(response, 201, { token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z') })
  }

  function answerCall(url: URL, authorization: string, response: ServerResponse, arrivedAt = clock.now()): void {
    const token = authorization.replace(/^Bearer /, '')
    const held = live.get(token)
    const installation = held && upstream.installations.get(held.installation)
    if (authorization !== '' && (!held || !installation || installation.suspended || arrivedAt >= held.expiresAt)) {
      return json(response, 401, { message: `Bad credentials: ${authorization}` })
    }
    const quota = installation ?? anonymous
    const credential = installation ? `installation ${held.installation}` : 'anonymous'
    const resource = url.pathname.startsWith('/search/') ? 'search' : 'core'
    const reset = String(Math.floor(clock.now() / 1000) + (resource === 'search' ? 60 : 3600))
    const limit = installation ? (resource === 'search' ? '30' : '5000') : resource === 'search' ? '10' : '60'
    const path = url.pathname + url.search
    if (quota[resource] <= 0) {
      upstream.calls.push({ credential, path, status: 403 })
      const headers = { 'x-ratelimit-limit': limit, 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-resource': resource }
      return json(response, 403, { message: `API rate limit exceeded for ${authorization || 'you'}` }, headers)
    }
    quota[resource] -= 1
    const headers = { 'x-ratelimit-limit': limit, 'x-ratelimit-remaining': String(quota[resource]), 'x-ratelimit-reset': reset, 'x-ratelimit-resource': resource }
    upstream.calls.push({ credential, path, status: 200 })
    if (upstream.failWith !== undefined) return json(response, upstream.failWith, { message: `Upstream trouble with ${authorization}` }, headers)
    const user = /^\/users\/([^/]+)$/.exec(url.pathname)?.[1]
    if (user) return json(response, 200, makeUser(user, { public_repos: 2 }), headers)
    const owner = /^\/users\/([^/]+)\/repos$/.exec(url.pathname)?.[1]
    if (owner) return json(response, 200, makeRepos(owner, 2), headers)
    if (/^\/users\/[^/]+\/followers$/.test(url.pathname)) return json(response, 200, makeFollowers(2), headers)
    if (url.pathname === '/search/issues') return json(response, 200, searchResult(3), headers)
    json(response, 404, { message: 'Not Found' }, headers)
  }

  const server = await startLocalUpstream(t, (request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost')
    const authorization = request.headers.authorization ?? ''
    if (url.pathname.startsWith('/app/') || /^\/users\/[^/]+\/installation$/.test(url.pathname)) return answerApp(request.method ?? '', url.pathname, authorization, response)
    const held = holds.filter((hold) => hold.matches(url.pathname + url.search)).map((hold) => hold.until)
    if (held.length === 0) return answerCall(url, authorization, response)
    // Judged now, answered later: a token live on arrival is answered as live.
    const arrivedAt = clock.now()
    upstream.heldCalls.push(url.pathname + url.search)
    void Promise.allSettled(held).then(() => answerCall(url, authorization, response, arrivedAt))
  })
  const env: TestEnv = { FORGE_API_URL: server.url, FORGE_APP_ID: PUBLIC_APP_ID, FORGE_APP_PRIVATE_KEY: privateKeyPem, FORGE_APP_PUBLIC: 'true' }
  return Object.assign(upstream, { url: server.url, env })
}
