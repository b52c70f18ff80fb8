import { generateKeyPairSync, randomBytes, verify } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Test } from 'tap'
import { startLocalUpstream } from './local-upstream.ts'
import type { TestClock, TestEnv } from './build.ts'
import { makeFollowers, makeRepo, makeRepos, makeUser, searchResult } from './upstream.ts'

export const APP_ID = '424242'
export const INSTALLATION_ID = '9001'
/** GitHub's installation tokens live an hour. */
export const TOKEN_LIFETIME_MS = 60 * 60 * 1000

/** One request the fake GitHub received, as the tests read it. */
export interface SeenRequest {
  method: string
  path: string
  authorization: string
  ifNoneMatch: string | undefined
}

export interface AppUpstream {
  url: string
  /** The App's variables, key inline (PEM), upstream at this server. */
  env: TestEnv
  privateKeyPem: string
  /** Every request, App endpoints included, in order. */
  requests: SeenRequest[]
  /** Installation tokens issued, in order. */
  minted: string[]
  /** Every JWT it was sent. */
  jwts: string[]
  /** The upstream stops accepting `token` (an administrator revoked it). */
  revoke(token: string): void
  /** Non-App requests (the service's own calls, not `/app/…` nor a public App's `/users/{login}/installation`), as `path`. */
  calls(): string[]
  /** Changes the account the App is installed on, and whether on all its repositories. */
  installation: { login: string; selection: 'all' | 'selected' }
  /** Stars of each repository of an owner, by login: what a star changes upstream (the fixture's count otherwise). */
  stars: Record<string, number>
  /** When set, the body of the token endpoint's 201 instead of a token. */
  mintBody: string | undefined
  /** Every installation token is refused (401), however fresh. */
  refuseTokens: boolean
  /** Rate-limit headers sent with every installation call's answer. */
  rateLimit: Record<string, string>
  /** When set, every installation call with a live token is answered this status (the upstream in trouble). */
  failWith: number | undefined
  /**
   * Requests that `matches` are answered only once `until` settles. Their token is judged when
   * they arrive, as GitHub does with a request it has accepted: one revoked meanwhile is still
   * answered as its request would have been then, `failWith` as it is when the answer goes.
   */
  holdAnswers(matches: (request: SeenRequest) => boolean, until: Promise<unknown>): void
  /** Resolves once a request that `matches` has arrived (one already received included). */
  untilRequested(matches: (request: SeenRequest) => boolean): Promise<void>
}

/** The App's own calls, with its JWT: they spend the App's quota, not the installation's. */
export const isAppCall = (path: string): boolean => path.startsWith('/app/') || /^\/users\/[^/]+\/installation$/.test(path)

function json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(body))
}

/**
 * GitHub as a GitHub App sees it, on 127.0.0.1: the App's endpoints take only a JWT signed with
 * the App's key (generated here) whose `iss`, `iat` and `exp` GitHub would accept on `clock`;
 * installation tokens live an hour and are refused (401) once expired or revoked; every other
 * endpoint answers only to a live installation token, with rate-limit headers and ETags (304 on a match).
 * Its failures quote the credentials, as a gateway that echoes the request does: a refused JWT or
 * token is in its 401's message, and a failing installation call's message holds the token it
 * carried and the last JWT the App sent, so that a service that repeats them unredacted shows it.
 */
export async function startAppUpstream(t: Test, clock: TestClock): Promise<AppUpstream> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const live = new Map<string, number>()
  const holds: Array<{ matches: (request: SeenRequest) => boolean; until: Promise<unknown> }> = []
  const arrivals = new Set<(request: SeenRequest) => void>()
  const upstream: Omit<AppUpstream, 'url' | 'env'> = {
    privateKeyPem,
    requests: [],
    minted: [],
    jwts: [],
    revoke: (token) => live.delete(token),
    calls: () => upstream.requests.filter((request) => !isAppCall(request.path)).map((request) => request.path),
    installation: { login: 'mona', selection: 'all' },
    stars: {},
    refuseTokens: false,
    mintBody: undefined,
    rateLimit: { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': String(Math.floor(clock.now() / 1000) + 3600) },
    failWith: undefined,
    holdAnswers: (matches, until) => void holds.push({ matches, until }),
    untilRequested: (matches) =>
      new Promise<void>((resolve) => {
        if (upstream.requests.some(matches)) return resolve()
        const check = (request: SeenRequest) => {
          if (!matches(request)) return
          arrivals.delete(check)
          resolve()
        }
        arrivals.add(check)
      }),
  }

  function isValidJwt(authorization: string): boolean {
    const jwt = authorization.replace(/^Bearer /, '')
    upstream.jwts.push(jwt)
    const [header, claims, signature] = jwt.split('.')
    if (!header || !claims || !signature) return false
    if (!verify('sha256', Buffer.from(`${header}.${claims}`), publicKey, Buffer.from(signature, 'base64url'))) return false
    const { alg } = JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg?: string }
    const { iat, exp, iss } = JSON.parse(Buffer.from(claims, 'base64url').toString()) as { iat: number; exp: number; iss: string }
    const now = clock.now() / 1000
    // GitHub: iat in the past (60 s is its advice), exp no more than 10 minutes ahead.
    return alg === 'RS256' && iss === APP_ID && iat <= now - 30 && iat >= now - 90 && exp > now && exp <= now + 600
  }

  function answerApp(request: IncomingMessage, response: ServerResponse, path: string, authorization: string): void {
    if (!isValidJwt(authorization)) return json(response, 401, { message: `A JSON web token could not be decoded: ${authorization}` })
    if (request.method === 'POST' && path === `/app/installations/${INSTALLATION_ID}/access_tokens`) {
      if (upstream.mintBody !== undefined) return void response.writeHead(201).end(upstream.mintBody)
      const token = `ghs_${randomBytes(18).toString('hex')}`
      const expiresAt = clock.now() + TOKEN_LIFETIME_MS
      live.set(token, expiresAt)
      upstream.minted.push(token)
      // GitHub's format: whole seconds, UTC.
      return json(response, 201, { token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'), repository_selection: 'all' })
    }
    if (request.method === 'GET' && path === `/app/installations/${INSTALLATION_ID}`) {
      return json(response, 200, { id: Number(INSTALLATION_ID), account: { login: upstream.installation.login }, repository_selection: upstream.installation.selection })
    }
    json(response, 404, { message: 'Not Found' })
  }

  function answerInstallation(url: URL, response: ServerResponse, ifNoneMatch: string | undefined): void {
    const headers = { ...upstream.rateLimit, 'x-ratelimit-resource': url.pathname.startsWith('/search/') ? 'search' : 'core' }
    const withEtag = (body: unknown) => {
      const etag = `"${Buffer.from(JSON.stringify(body)).length}"`
      if (ifNoneMatch === etag) return void response.writeHead(304, { ...headers, etag }).end()
      json(response, 200, body, { ...headers, etag })
    }
    const user = /^\/users\/([^/]+)$/.exec(url.pathname)?.[1]
    if (user) return withEtag(makeUser(user, { public_repos: 2 }))
    const owner = /^\/users\/([^/]+)\/repos$/.exec(url.pathname)?.[1]
    const stars = owner === undefined ? undefined : upstream.stars[owner]
    if (owner) return withEtag(makeRepos(owner, 2, () => (stars === undefined ? {} : { stargazers_count: stars })))
    if (/^\/users\/[^/]+\/followers$/.test(url.pathname)) return withEtag(makeFollowers(2))
    if (url.pathname === '/search/issues') return json(response, 200, searchResult(5), headers)
    if (url.pathname === '/installation/repositories') {
      // 101 repositories over two pages, in no order: one never updated, the most recent on page 2.
      const login = upstream.installation.login
      const first = [
        makeRepo(login, 'never', { updated_at: null }),
        ...makeRepos(login, 98, (index) => ({ updated_at: `2020-01-01T00:00:${String(index % 60).padStart(2, '0')}Z` })),
        makeRepo(login, 'recent', { updated_at: '2023-01-01T00:00:00Z' }),
      ]
      const second = [makeRepo(login, 'secret', { private: true, updated_at: '2024-06-01T00:00:00Z' })]
      return json(response, 200, { total_count: 101, repositories: url.searchParams.get('page') === '2' ? second : first }, headers)
    }
    json(response, 404, { message: 'Not Found' }, headers)
  }

  const server = await startLocalUpstream(t, (request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost')
    const authorization = request.headers.authorization ?? ''
    const ifNoneMatch = request.headers['if-none-match']
    const seen = { method: request.method ?? '', path: url.pathname + url.search, authorization, ifNoneMatch }
    upstream.requests.push(seen)
    for (const arrival of arrivals) arrival(seen)
    const expiresAt = live.get(authorization.replace(/^Bearer /, ''))
    const tokenLive = !upstream.refuseTokens && expiresAt !== undefined && clock.now() < expiresAt
    const held = holds.filter((hold) => hold.matches(seen)).map((hold) => hold.until)
    if (held.length === 0) return answer(request, response, url, authorization, ifNoneMatch, tokenLive)
    void Promise.allSettled(held).then(() => answer(request, response, url, authorization, ifNoneMatch, tokenLive))
  })

  function answer(request: IncomingMessage, response: ServerResponse, url: URL, authorization: string, ifNoneMatch: string | undefined, tokenLive: boolean): void {
    if (request.headers.accept !== 'application/vnd.github+json' || request.headers['x-github-api-version'] !== '2022-11-28' || !request.headers['user-agent']) {
      return json(response, 400, { message: 'missing the pinned headers' })
    }
    if (url.pathname.startsWith('/app/')) return answerApp(request, response, url.pathname, authorization)
    const account = /^\/users\/([^/]+)\/installation$/.exec(url.pathname)?.[1]
    if (account !== undefined) {
      // A public App (FORGE_APP_PUBLIC=true) asks each account's: every account has the one installation.
      if (!isValidJwt(authorization)) return json(response, 401, { message: `A JSON web token could not be decoded: ${authorization}` })
      return json(response, 200, { id: Number(INSTALLATION_ID), account: { login: account }, suspended_at: null })
    }
    if (!tokenLive) return json(response, 401, { message: `Bad credentials: ${authorization}` })
    const failWith = upstream.failWith
    const trouble = { message: `Upstream trouble with ${authorization} (App JWT ${upstream.jwts.at(-1) ?? 'none'})` }
    if (failWith === undefined) return answerInstallation(url, response, ifNoneMatch)
    json(response, failWith, trouble)
  }
  const env: TestEnv = {
    FORGE_API_URL: server.url,
    FORGE_APP_ID: APP_ID,
    FORGE_APP_INSTALLATION_ID: INSTALLATION_ID,
    FORGE_APP_PRIVATE_KEY: privateKeyPem,
  }
  return Object.assign(upstream, { url: server.url, env })
}
