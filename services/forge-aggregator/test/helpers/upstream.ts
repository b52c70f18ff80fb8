import nock from 'nock'
import user from '../fixtures/user.json' with { type: 'json' }
import userRepos from '../fixtures/user-repos.json' with { type: 'json' }
import followers from '../fixtures/followers.json' with { type: 'json' }
import searchIssues from '../fixtures/search-issues.json' with { type: 'json' }
import repository from '../fixtures/repository.json' with { type: 'json' }
import authenticatedUser from '../fixtures/authenticated-user.json' with { type: 'json' }
import authenticatedUserRepos from '../fixtures/authenticated-user-repos.json' with { type: 'json' }
import recordedHeaders from '../fixtures/headers.json' with { type: 'json' }
import type { operations } from '@octokit/openapi-types'

/** Nothing reaches the internet: only nock's interceptors and local test servers answer. */
nock.disableNetConnect()
nock.enableNetConnect('127.0.0.1')

export const API = 'https://api.github.com'

/**
 * Upstream requests no interceptor expected, recorded for the rest of the test `t`: with
 * `scope.done()`, an empty list proves the exact set of calls made.
 */
export function recordUnexpectedCalls(t: { teardown(fn: () => void): void }): string[] {
  const unexpected: string[] = []
  const record = (request: { method?: string; path?: string }) => unexpected.push(`${request.method} ${request.path}`)
  nock.emitter.on('no match', record)
  t.teardown(() => nock.emitter.removeListener('no match', record))
  return unexpected
}

/** Headers every upstream request must carry (docs/design.md, "Upstream calls"). */
export const PINNED_HEADERS = {
  accept: 'application/vnd.github+json',
  'x-github-api-version': '2022-11-28',
  'user-agent': /^forge-aggregator\//,
}

/** Response headers as api.github.com sends them (recorded by @octokit/fixtures). */
export const RESOURCE_HEADERS = recordedHeaders.resource
export const SEARCH_HEADERS = recordedHeaders.search

/** GitHub's own types for the fixtures (the service checks only the fields it reads). */
type Json200<Operation extends keyof operations> = operations[Operation] extends { responses: { 200: { content: { 'application/json': infer Body } } } } ? Body : never
export type UpstreamUser = Json200<'users/get-by-username'>
export type Repo = Json200<'repos/list-for-user'>[number]
export type Follower = Json200<'users/list-followers-for-user'>[number]

export const fixtures = { user, repository, authenticatedUser, authenticatedUserRepos, searchIssues }

/** The official user example, as `login`. */
export function makeUser(login: string, overrides: Partial<UpstreamUser> = {}): UpstreamUser {
  return { ...(user as UpstreamUser), login, html_url: `https://github.com/${login}`, ...overrides }
}

/** The official repository example, renamed, with any field overridden. */
export function makeRepo(owner: string, name: string, overrides: Partial<Repo> = {}): Repo {
  const [example] = userRepos as unknown as [Repo]
  return { ...example, name, full_name: `${owner}/${name}`, html_url: `https://github.com/${owner}/${name}`, fork: false, ...overrides }
}

/** `count` repositories named `repo-000`…, each shaped by `shape(index)`. */
export function makeRepos(owner: string, count: number, shape: (index: number) => Partial<Repo> = () => ({})): Repo[] {
  return Array.from({ length: count }, (_, index) => makeRepo(owner, `repo-${String(index).padStart(3, '0')}`, shape(index)))
}

/** `count` followers shaped like the official example. */
export function makeFollowers(count: number): Follower[] {
  const [example] = followers as unknown as [Follower]
  return Array.from({ length: count }, (_, index) => ({ ...example, login: `follower-${index}`, id: 1000 + index }))
}

export function searchResult(totalCount: number) {
  return { ...searchIssues, total_count: totalCount }
}

export interface UserMock {
  login: string
  /** Fields of the profile other than the official example's. */
  profile?: Partial<UpstreamUser>
  publicRepos?: number
  repoPages?: Repo[][]
  followers?: Follower[]
  followersLimit?: number
  issues?: number
  prs?: number
}

/**
 * The five upstream calls of one `users` request (plus later repository pages), each expected
 * exactly once with the pinned headers. `scope.done()` then proves the exact calls made.
 */
export function mockUser(mock: UserMock, scope = nock(API, { reqheaders: PINNED_HEADERS })): nock.Scope {
  const { login } = mock
  const pages = mock.repoPages ?? [makeRepos(login, 3)]
  const publicRepos = mock.publicRepos ?? pages.flat().length
  scope.get(`/users/${login}`).reply(200, makeUser(login, { public_repos: publicRepos, ...mock.profile }), RESOURCE_HEADERS)
  pages.forEach((page, index) => {
    scope
      .get(`/users/${login}/repos`)
      .query({ type: 'owner', per_page: '100', page: String(index + 1) })
      .reply(200, page, RESOURCE_HEADERS)
  })
  scope
    .get(`/users/${login}/followers`)
    .query({ per_page: String(mock.followersLimit ?? 30) })
    .reply(200, mock.followers ?? makeFollowers(2), RESOURCE_HEADERS)
  mockSearch(scope, login, 'issue', mock.issues ?? 7)
  mockSearch(scope, login, 'pr', mock.prs ?? 3)
  return scope
}

/**
 * What every search's query ends with: nothing, or ` is:public` with a public App, whose searches
 * count only what an anonymous caller would see (`buildInMode` sets it for its test).
 */
let searchQualifier = ''
export function searchesEndWith(qualifier: string): void {
  searchQualifier = qualifier
}

/** The `q` of `login`'s search for issues or PRs, as the service sends it in the test's mode. */
export function searchQuery(login: string, kind: 'issue' | 'pr'): string {
  return `author:${login} is:${kind}${searchQualifier}`
}

export function mockSearch(scope: nock.Scope, login: string, kind: 'issue' | 'pr', totalCount: number): nock.Scope {
  return scope
    .get('/search/issues')
    .query({ q: searchQuery(login, kind), per_page: '1' })
    .reply(200, searchResult(totalCount), SEARCH_HEADERS)
}

/**
 * A nock reply held until `until` resolves: a test that needs a call in flight while something
 * else happens opens `until` once it has seen that happen, rather than guessing how long it takes.
 */
export function heldReply(until: Promise<unknown>, status: number, body: unknown, headers: Record<string, string> = {}) {
  return async (): Promise<nock.ReplyFnResult> => {
    await until
    return [status, body as nock.ReplyBody, headers]
  }
}

/** The five calls of one cold `users` answer for `login` (two repositories, one follower), each held until `until`. */
export function mockHeldUser(login: string, until: Promise<unknown>): nock.Scope {
  const scope = nock(API)
  scope.get(`/users/${login}`).reply(heldReply(until, 200, makeUser(login, { public_repos: 2 }), RESOURCE_HEADERS))
  scope.get(`/users/${login}/repos`).query(true).reply(heldReply(until, 200, makeRepos(login, 2), RESOURCE_HEADERS))
  scope.get(`/users/${login}/followers`).query(true).reply(heldReply(until, 200, makeFollowers(1), RESOURCE_HEADERS))
  scope.get('/search/issues').query(true).times(2).reply(heldReply(until, 200, searchResult(1), SEARCH_HEADERS))
  return scope
}
