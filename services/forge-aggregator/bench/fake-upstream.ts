/**
 * The upstream the benchmark talks to: the five routes a users answer reads, with the official
 * example bodies (test/fixtures) made into a plausible account per requested login, answered
 * DELAY_MS after each request arrived, with the upstream's own headers. Resources carry an ETag
 * and answer a matching If-None-Match with 304; searches carry none (as the real API does), so
 * they are always answered in full.
 *
 * It runs as its own process so that its work never shares an event loop with the load
 * generator or the service: an answer is due DELAY_MS after arrival, not "after autocannon
 * lets the timer fire". The body is built inside that delay, so its cost does not show either.
 *
 * GET /__calls says how many upstream calls it answered since POST /__reset (those two are not
 * counted). POST /__trouble?status=502[&resource=core|search][&spent=1] makes it answer every call
 * (of that resource) with that status from then on, with `X-RateLimit-Remaining: 0` and a reset
 * an hour away when `spent`, as a rate limit that ran out does; POST /__reset ends the trouble.
 *
 * GitHub App (DESIGN §13): `POST /app/installations/:id/access_tokens` mints an installation
 * token that expires an hour later, `GET /app/installations/:id` names the account; both take any
 * well-formed RS256 JWT as a Bearer (its signature and claims are what test/github-app.test.ts
 * checks against a stricter fake), answer after DELAY_MS, are counted apart (`app`, not `total`)
 * and never meet the trouble. With FAKE_APP_INSTALLATION_ID set (App mode), every other route
 * answers 401 unless called with `Authorization: Bearer <a live token it minted>`.
 * Usage: PORT=<port> [FAKE_APP_INSTALLATION_ID=<id>] node bench/fake-upstream.ts
 */
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyReply } from 'fastify'
import {
  DELAY_MS,
  FOLLOWERS_PER_USER,
  ISSUES_PER_USER,
  PRS_PER_USER,
  REPOS_PER_USER,
  type RouteName,
  type AppCalls,
  type UpstreamCalls,
} from './fake-account.ts'

const LOGIN = /^[A-Za-z0-9-]{1,39}$/
/** The login the fixtures are written for; every occurrence becomes the requested login. */
const FIXTURE_LOGIN = 'octocat'

const fixture = (name: string): unknown => JSON.parse(readFileSync(new URL(`../test/fixtures/${name}`, import.meta.url), 'utf8'))
const headers = fixture('headers.json') as Record<'resource' | 'search', Record<string, string>>
// The recorded ETag belongs to the recorded body; ours is computed from each body.
const resourceHeaders = Object.fromEntries(Object.entries(headers.resource).filter(([name]) => name !== 'etag'))
const searchHeaders = headers.search

const profileTemplate = JSON.stringify({
  ...(fixture('user.json') as object),
  public_repos: REPOS_PER_USER,
  followers: FOLLOWERS_PER_USER,
})
const [exampleRepo] = fixture('user-repos.json') as [Record<string, unknown>]
const repos = Array.from({ length: REPOS_PER_USER }, (_, index) => {
  const name = `project-${String(index + 1).padStart(2, '0')}`
  // Every URL of the example names its repository: each repository gets its own.
  const repo = JSON.parse(JSON.stringify(exampleRepo).replaceAll('Hello-World', name)) as Record<string, unknown>
  return {
    ...repo,
    id: 1_296_269 + index,
    stargazers_count: (index * 37) % 101,
    forks_count: index % 9,
    watchers_count: (index * 37) % 101,
    fork: index % 6 === 5,
    language: ['TypeScript', 'Go', 'Rust', null][index % 4],
  }
})
const [exampleFollower] = fixture('followers.json') as [Record<string, unknown>]
const followers = Array.from({ length: FOLLOWERS_PER_USER }, (_, index) => {
  const login = `follower-${index + 1}`
  return { ...(JSON.parse(JSON.stringify(exampleFollower).replaceAll(FIXTURE_LOGIN, login)) as object), id: 1000 + index }
})
const searchExample = fixture('search-issues.json') as { items: unknown[] }

interface Trouble {
  status: number
  resource: RouteResource | undefined
  spent: boolean
}

type RouteResource = 'core' | 'search'

/** GitHub's installation tokens live an hour. */
const TOKEN_LIFETIME_MS = 60 * 60 * 1000
/** Set: App mode, every REST route needs an installation token minted here. */
const appInstallationId = process.env.FAKE_APP_INSTALLATION_ID
/** Tokens minted, and when each expires. */
const liveTokens = new Map<string, number>()
const appCalls: AppCalls = { tokensMinted: 0, installationLookups: 0, refused: 0 }

let calls: UpstreamCalls = freshCalls()
let trouble: Trouble | undefined

const app = Fastify()

app.addHook('onRequest', async (request, reply) => {
  if (appInstallationId === undefined || request.url.startsWith('/__') || request.url.startsWith('/app/')) return
  const token = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1]
  const expiresAt = token === undefined ? undefined : liveTokens.get(token)
  if (expiresAt !== undefined && Date.now() < expiresAt) return
  calls.total++
  appCalls.refused++
  return reply.code(401).send({ message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' })
})

app.post<{ Params: { id: string } }>('/app/installations/:id/access_tokens', async (request, reply) => {
  if (!isWellFormedJwt(request.headers.authorization)) return reply.code(401).send({ message: 'A JSON web token could not be decoded' })
  if (request.params.id !== appInstallationId) return reply.code(404).send({ message: 'Not Found' })
  appCalls.tokensMinted++
  await sleep(Math.max(0, DELAY_MS - reply.elapsedTime))
  const token = `ghs_${randomBytes(18).toString('hex')}`
  const expiresAt = Date.now() + TOKEN_LIFETIME_MS
  liveTokens.set(token, expiresAt)
  // GitHub's format: whole seconds, UTC.
  return reply.code(201).send({ token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'), repository_selection: 'all' })
})

app.get<{ Params: { id: string } }>('/app/installations/:id', async (request, reply) => {
  if (!isWellFormedJwt(request.headers.authorization)) return reply.code(401).send({ message: 'A JSON web token could not be decoded' })
  if (request.params.id !== appInstallationId) return reply.code(404).send({ message: 'Not Found' })
  appCalls.installationLookups++
  await sleep(Math.max(0, DELAY_MS - reply.elapsedTime))
  return { id: Number(appInstallationId), account: { login: FIXTURE_LOGIN, type: 'User' }, repository_selection: 'all' }
})

app.get('/__calls', async () => calls)
app.post('/__reset', async () => {
  calls = freshCalls()
  trouble = undefined
  return calls
})
app.post<{ Querystring: { status: string; resource?: RouteResource; spent?: string } }>('/__trouble', async (request) => {
  trouble = { status: Number(request.query.status), resource: request.query.resource, spent: request.query.spent === '1' }
  return trouble
})

app.get<{ Params: { login: string } }>('/users/:login', async (request, reply) => {
  const { login } = request.params
  return answer(reply, 'user', () => (LOGIN.test(login) ? profileTemplate.replaceAll(FIXTURE_LOGIN, login) : undefined), request.headers)
})

app.get<{ Params: { login: string }; Querystring: { per_page?: string; page?: string } }>('/users/:login/repos', async (request, reply) => {
  const { login } = request.params
  const perPage = Math.min(Number(request.query.per_page ?? 30), 100)
  const page = Number(request.query.page ?? 1)
  return answer(
    reply,
    'repos',
    () => (LOGIN.test(login) ? JSON.stringify(repos.slice((page - 1) * perPage, page * perPage)).replaceAll(FIXTURE_LOGIN, login) : undefined),
    request.headers,
  )
})

app.get<{ Params: { login: string }; Querystring: { per_page?: string } }>('/users/:login/followers', async (request, reply) => {
  const { login } = request.params
  const perPage = Math.min(Number(request.query.per_page ?? 30), 100)
  return answer(reply, 'followers', () => (LOGIN.test(login) ? JSON.stringify(followers.slice(0, perPage)) : undefined), request.headers)
})

app.get<{ Querystring: { q?: string; per_page?: string } }>('/search/issues', async (request, reply) => {
  const query = request.query.q ?? ''
  const perPage = Math.min(Number(request.query.per_page ?? 30), 100)
  return answer(reply, 'search', () => {
    const kind = /\bis:(issue|pr)\b/.exec(query)?.[1]
    if (!kind || !/\bauthor:[A-Za-z0-9-]+\b/.test(query)) return undefined
    return JSON.stringify({
      ...searchExample,
      total_count: kind === 'issue' ? ISSUES_PER_USER : PRS_PER_USER,
      items: searchExample.items.slice(0, perPage),
    })
  })
})

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })

/**
 * Answers DELAY_MS after the request arrived: the body (undefined: 404) when `ifNoneMatch` is
 * absent or stale, else 304. Only resources (`ifNoneMatch` passed) get an ETag.
 */
async function answer(
  reply: FastifyReply,
  route: RouteName,
  body: () => string | undefined,
  requestHeaders?: { 'if-none-match'?: string | undefined },
): Promise<FastifyReply> {
  const text = body()
  const etag = text !== undefined && requestHeaders ? `"${createHash('sha1').update(text).digest('hex')}"` : undefined
  const notModified = etag !== undefined && requestHeaders?.['if-none-match'] === etag
  // Counted on arrival, all of it: a reset while the answer is delayed must not split one call.
  calls.total++
  calls.byRoute[route]++
  if (notModified) calls.notModified++
  if (calls.firstTroubleAnsweredAt !== undefined) calls.afterFirstTrouble++
  const resource: RouteResource = route === 'search' ? 'search' : 'core'
  const failing = trouble && (trouble.resource === undefined || trouble.resource === resource) ? trouble : undefined
  await sleep(Math.max(0, DELAY_MS - reply.elapsedTime))

  if (failing) {
    calls.troubled++
    calls.firstTroubleAnsweredAt ??= Date.now()
    const limit = failing.spent
      ? { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600), 'x-ratelimit-resource': resource }
      : {}
    return reply.code(failing.status).headers(limit).send({ message: failing.spent ? 'API rate limit exceeded' : 'Upstream trouble' })
  }

  if (text === undefined) return reply.code(404).send({ message: 'Not Found', documentation_url: 'https://docs.github.com/rest' })
  if (etag === undefined) return reply.headers(searchHeaders).send(text)
  reply.headers({ ...resourceHeaders, etag })
  return notModified ? reply.code(304).send() : reply.send(text)
}

/** `Bearer <header>.<claims>.<signature>`, an RS256 header and the claims GitHub reads (iss, iat, exp). */
function isWellFormedJwt(authorization: string | undefined): boolean {
  const parts = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization ?? '')
  if (!parts) return false
  try {
    const header = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString()) as { alg?: unknown }
    const claims = JSON.parse(Buffer.from(parts[2]!, 'base64url').toString()) as { iss?: unknown; iat?: unknown; exp?: unknown }
    return header.alg === 'RS256' && typeof claims.iss === 'string' && typeof claims.iat === 'number' && typeof claims.exp === 'number'
  } catch {
    return false
  }
}

function freshCalls(): UpstreamCalls {
  return { app: appCalls, total: 0, notModified: 0, troubled: 0, afterFirstTrouble: 0, byRoute: { user: 0, repos: 0, followers: 0, search: 0 } }
}
