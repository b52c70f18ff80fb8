/**
 * The upstream the benchmarks talk to (and deploy/haproxy's tests, by path): the five routes a
 * users answer reads, with the official example bodies (test/fixtures) made into one account per
 * requested login (30 repositories, 20 followers), answered DELAY_MS after each request arrived,
 * with the upstream's own headers. Resources carry an ETag and answer a matching If-None-Match
 * with 304; searches carry none, as the real API's do.
 *
 * It runs as its own process so that its work never shares an event loop with the load generator
 * or the service: an answer is due DELAY_MS after arrival, and its body is built inside that delay.
 * Usage: PORT=<port> node bench/fake-upstream.ts
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyReply } from 'fastify'

export const DELAY_MS = 50
const REPOS_PER_USER = 30
const FOLLOWERS_PER_USER = 20
const LOGIN = /^[A-Za-z0-9-]{1,39}$/
/** The login the fixtures are written for; every occurrence becomes the requested login. */
const FIXTURE_LOGIN = 'octocat'

const fixture = (name: string): unknown => JSON.parse(readFileSync(new URL(`../test/fixtures/${name}`, import.meta.url), 'utf8'))
const recorded = fixture('headers.json') as Record<'resource' | 'search', Record<string, string>>
// The recorded ETag belongs to the recorded body; ours is computed from each body.
const resourceHeaders = Object.fromEntries(Object.entries(recorded.resource).filter(([name]) => name !== 'etag'))

const profile = JSON.stringify({ ...(fixture('user.json') as object), public_repos: REPOS_PER_USER, followers: FOLLOWERS_PER_USER })
const [exampleRepo] = fixture('user-repos.json') as [object]
const repos = Array.from({ length: REPOS_PER_USER }, (_, index) => {
  const name = `project-${String(index + 1).padStart(2, '0')}`
  // Every URL of the example names its repository: each repository gets its own.
  const repo = JSON.parse(JSON.stringify(exampleRepo).replaceAll('Hello-World', name)) as object
  const stars = (index * 37) % 101
  const language = ['TypeScript', 'Go', 'Rust', null][index % 4]
  return { ...repo, id: 1_296_269 + index, stargazers_count: stars, watchers_count: stars, forks_count: index % 9, fork: index % 6 === 5, language }
})
const [exampleFollower] = fixture('followers.json') as [object]
const followers = Array.from({ length: FOLLOWERS_PER_USER }, (_, index) => ({
  ...(JSON.parse(JSON.stringify(exampleFollower).replaceAll(FIXTURE_LOGIN, `follower-${index + 1}`)) as object),
  id: 1000 + index,
}))
const search = fixture('search-issues.json') as { items: unknown[] }

type Query = { per_page?: string; page?: string; q?: string }
const perPage = (query: Query) => Math.min(Number(query.per_page ?? 30), 100)

const app = Fastify()
app.get<{ Params: { login: string } }>('/users/:login', async ({ params, headers }, reply) =>
  answer(reply, headers, LOGIN.test(params.login) ? () => profile.replaceAll(FIXTURE_LOGIN, params.login) : undefined),
)
app.get<{ Params: { login: string }; Querystring: Query }>('/users/:login/repos', async ({ params, query, headers }, reply) => {
  const page = Number(query.page ?? 1)
  const body = () => JSON.stringify(repos.slice((page - 1) * perPage(query), page * perPage(query))).replaceAll(FIXTURE_LOGIN, params.login)
  return answer(reply, headers, LOGIN.test(params.login) ? body : undefined)
})
app.get<{ Params: { login: string }; Querystring: Query }>('/users/:login/followers', async ({ params, query, headers }, reply) =>
  answer(reply, headers, LOGIN.test(params.login) ? () => JSON.stringify(followers.slice(0, perPage(query))) : undefined),
)
app.get<{ Querystring: Query }>('/search/issues', async ({ query }, reply) => {
  const kind = /\bis:(issue|pr)\b/.exec(query.q ?? '')?.[1]
  const count = kind === 'issue' ? 280 : 42
  return answer(reply, undefined, kind ? () => JSON.stringify({ ...search, total_count: count, items: search.items.slice(0, perPage(query)) }) : undefined)
})
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })

/**
 * Answers DELAY_MS after the request arrived: the body (none: 404), or 304 when the request's
 * If-None-Match is the body's ETag. Only resources (`requestHeaders` given) get an ETag.
 */
async function answer(reply: FastifyReply, requestHeaders: { 'if-none-match'?: string | undefined } | undefined, body: (() => string) | undefined) {
  const text = body?.()
  await sleep(Math.max(0, DELAY_MS - reply.elapsedTime))
  if (text === undefined) return reply.code(404).send({ message: 'Not Found', documentation_url: 'https://docs.github.com/rest' })
  if (!requestHeaders) return reply.headers(recorded.search).send(text)
  const etag = `"${createHash('sha1').update(text).digest('hex')}"`
  reply.headers({ ...resourceHeaders, etag })
  return requestHeaders['if-none-match'] === etag ? reply.code(304).send() : reply.send(text)
}
