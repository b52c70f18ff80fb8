/**
 * A fake GitHub REST API whose accounts change while a bench runs, in the bench's own process: an
 * undici MockAgent, given to `buildApp` as the dispatcher the upstream client builds on, so every
 * call still goes through the client's interceptors (budget, deduplication, retries, redirects).
 *
 * Each login it is asked about becomes an account, as bench/fake-upstream.ts makes them from the
 * official example bodies (test/fixtures): 30 repositories, none a fork, and 20 followers. A star
 * (`star`) adds one to one repository's `stargazers_count`, so the repository list's body, and
 * its ETag, change; the profile and the followers do not. Like GitHub, resources carry an ETag
 * and answer a matching `If-None-Match` with an empty 304; searches carry none and always answer
 * 200. It keeps no rate limit and sends no X-RateLimit headers: the service's budget never holds a
 * call back, so the calls counted are what the service asks for.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { MockAgent, type Dispatcher } from 'undici'

/** The origin the service is configured with (`FORGE_API_URL`); nothing leaves the process. */
export const UPSTREAM_ORIGIN = 'https://api.github.com'
const REPOS_PER_ACCOUNT = 30
const FOLLOWERS_PER_ACCOUNT = 20
const FIXTURE_LOGIN = 'octocat'

/** What GitHub charges: a 304 to an authenticated caller is free, a search spends the search limit. */
export interface CallTally {
  /** Core calls answered 200 with a body, conditional or not. */
  full: number
  /** Of those, the ones that carried an If-None-Match whose ETag no longer matched. */
  fullConditional: number
  /** Core calls answered 304 (an If-None-Match that matched). */
  notModified: number
  searches: number
  /** Anything else (404s): none is expected. */
  other: number
}

/** What one star changed, as GitHub's `star` delivery tells it. */
export interface Starred {
  /** The repository as the delivery's `repository` carries it, its new count included. */
  repository: Record<string, unknown>
  /** The account's stars over its repositories, after this one. */
  totalStars: number
}

export interface StatefulUpstream {
  dispatcher: Dispatcher
  /** Every call so far (a copy). */
  tally(): CallTally
  /** One more star on one of `login`'s repositories, chosen by `pick` (an index below the count). */
  star(login: string, pick: (count: number) => number): Starred
  close(): Promise<void>
}

/**
 * One account: what changes (its repositories' stars), and the bodies that do not, as bytes. The
 * repository list (about 160 KB) is made from `REPOSITORY` when asked for, not kept: a thousand
 * accounts' lists would hold 160 MB.
 */
interface Account {
  login: string
  /** Where its repositories' ids start. */
  firstId: number
  stars: number[]
  /** Stars given since the account was made: every body that shows stars is of this version. */
  version: number
  profile: Buffer
  followers: Buffer
  issues: number
  prs: number
}

type Reply = { statusCode: number; data?: Buffer | string; responseOptions: { headers: Record<string, string> } }

const fixture = (name: string): unknown => JSON.parse(readFileSync(new URL(`../test/fixtures/${name}`, import.meta.url), 'utf8'))
const recorded = fixture('headers.json') as Record<'resource' | 'search', Record<string, string>>
/** GitHub's headers less the ETag (ours) and the rate-limit ones (no limit here). */
const withoutLimits = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).filter(([name]) => name !== 'etag' && !name.startsWith('x-ratelimit-')))
const RESOURCE_HEADERS = withoutLimits(recorded.resource)
const SEARCH_HEADERS = withoutLimits(recorded.search)
const exampleProfile = JSON.stringify(fixture('user.json'))

/** The slots of the example repository that differ from one repository to the next. */
type Slot = 'login' | 'name' | 'id' | 'stars'
const SLOTS: Record<string, Slot> = { [FIXTURE_LOGIN]: 'login', 'Hello-World': 'name', '"id":1296269,': 'id' }
const REPOSITORY = repositoryTemplate(JSON.stringify((fixture('user-repos.json') as unknown[])[0]))
const exampleFollower = (fixture('followers.json') as Record<string, unknown>[])[0]!
const exampleSearch = fixture('search-issues.json') as { items: unknown[] }

export function createStatefulUpstream(): StatefulUpstream {
  const accounts = new Map<string, Account>()
  const calls: CallTally = { full: 0, fullConditional: 0, notModified: 0, searches: 0, other: 0 }
  const agent = new MockAgent()
  agent.disableNetConnect()
  agent
    .get(UPSTREAM_ORIGIN)
    .intercept({ path: () => true, method: 'GET' })
    .reply(({ path, headers }) => answer(new URL(path, UPSTREAM_ORIGIN), ifNoneMatch(headers)))
    .persist()

  const accountOf = (login: string): Account => {
    const key = login.toLowerCase()
    let account = accounts.get(key)
    if (!account) accounts.set(key, (account = makeAccount(login, accounts.size)))
    return account
  }

  function answer(url: URL, condition: string | undefined): Reply {
    if (url.pathname === '/search/issues') {
      calls.searches++
      return searchAnswer(url)
    }
    const resource = resourceOf(url)
    if (!resource) {
      calls.other++
      return { statusCode: 404, data: '{"message":"Not Found"}', responseOptions: { headers: RESOURCE_HEADERS } }
    }
    const etag = etagOf(resource.account.login, resource.kind, resource.kind === 'repos' ? resource.account.version : 0)
    const headers = { ...RESOURCE_HEADERS, etag }
    if (condition === etag) {
      calls.notModified++
      return { statusCode: 304, responseOptions: { headers } }
    }
    calls.full++
    if (condition !== undefined) calls.fullConditional++
    return { statusCode: 200, data: resource.body(), responseOptions: { headers } }
  }

  /** The account and body a resource path names (`/users/:login`, `…/repos`, `…/followers`). */
  function resourceOf(url: URL): { account: Account; kind: 'profile' | 'repos' | 'followers'; body: () => Buffer | string } | undefined {
    const match = /^\/users\/([A-Za-z0-9-]{1,39})(\/repos|\/followers)?$/.exec(url.pathname)
    if (!match) return undefined
    const account = accountOf(match[1]!)
    if (match[2] === '/followers') return { account, kind: 'followers', body: () => account.followers }
    if (match[2] === '/repos') return { account, kind: 'repos', body: () => (Number(url.searchParams.get('page') ?? 1) > 1 ? '[]' : reposText(account)) }
    return { account, kind: 'profile', body: () => account.profile }
  }

  function searchAnswer(url: URL): Reply {
    const query = /^author:([A-Za-z0-9-]{1,39}) is:(issue|pr)$/.exec(url.searchParams.get('q') ?? '')
    if (!query) return { statusCode: 422, data: '{"message":"Validation Failed"}', responseOptions: { headers: SEARCH_HEADERS } }
    const account = accountOf(query[1]!)
    const data = JSON.stringify({ ...exampleSearch, total_count: query[2] === 'issue' ? account.issues : account.prs, items: exampleSearch.items.slice(0, 1) })
    return { statusCode: 200, data, responseOptions: { headers: SEARCH_HEADERS } }
  }

  return {
    dispatcher: agent,
    tally: () => ({ ...calls }),
    star(login, pick) {
      const account = accountOf(login)
      const index = pick(account.stars.length)
      account.stars[index]!++
      account.version++
      const totalStars = account.stars.reduce((total, stars) => total + stars, 0)
      return { repository: JSON.parse(repositoryText(account, index)) as Record<string, unknown>, totalStars }
    },
    close: () => agent.close(),
  }
}

/** An account for `login`, its counts varied by `index` so that accounts differ. */
function makeAccount(login: string, index: number): Account {
  const named = (text: string) => text.replaceAll(FIXTURE_LOGIN, login)
  const followers = Array.from({ length: FOLLOWERS_PER_ACCOUNT }, (_, follower) => ({ ...exampleFollower, login: `follower-${follower + 1}`, id: 1000 + follower }))
  const profile = { ...(JSON.parse(named(exampleProfile)) as object), public_repos: REPOS_PER_ACCOUNT, followers: FOLLOWERS_PER_ACCOUNT }
  return {
    login,
    firstId: 1_296_269 + index * REPOS_PER_ACCOUNT,
    stars: Array.from({ length: REPOS_PER_ACCOUNT }, (_, repo) => (index * 7 + repo * 37) % 101),
    version: 0,
    profile: Buffer.from(JSON.stringify(profile)),
    followers: Buffer.from(JSON.stringify(followers)),
    issues: 100 + (index % 400),
    prs: 10 + (index % 90),
  }
}

/**
 * The example repository's JSON cut at its slots (the owner's login, the name, its own id, the
 * two star counts): the text around them (one piece more than the slots), joined again with each
 * slot's value by `repositoryText`.
 */
function repositoryTemplate(example: string): { texts: string[]; slots: Slot[] } {
  const pieces = example.split(/(octocat|Hello-World|"id":1296269,|"stargazers_count":\d+,"watchers_count":\d+)/)
  return {
    texts: pieces.filter((_, index) => index % 2 === 0),
    slots: pieces.filter((_, index) => index % 2 === 1).map((piece) => SLOTS[piece] ?? 'stars'),
  }
}

function repositoryText(account: Account, index: number): string {
  const stars = account.stars[index]!
  const values: Record<Slot, string> = {
    login: account.login,
    name: `project-${String(index + 1).padStart(2, '0')}`,
    id: `"id":${account.firstId + index},`,
    stars: `"stargazers_count":${stars},"watchers_count":${stars}`,
  }
  // Appended piece by piece: twice as fast as map and join, and the list's body is remade often.
  const { texts, slots } = REPOSITORY
  let text = texts[0]!
  for (let at = 0; at < slots.length; at++) text += values[slots[at]!] + texts[at + 1]!
  return text
}

function reposText(account: Account): string {
  let text = '['
  for (let index = 0; index < account.stars.length; index++) text += `${index > 0 ? ',' : ''}${repositoryText(account, index)}`
  return `${text}]`
}

/** An opaque strong ETag that changes exactly when the body does. */
function etagOf(login: string, kind: string, version: number): string {
  return `"${createHash('sha1').update(`${login.toLowerCase()}/${kind}/${version}`).digest('hex')}"`
}

function ifNoneMatch(headers: Headers | Record<string, string> | undefined): string | undefined {
  if (headers === undefined) return undefined
  if (headers instanceof Headers) return headers.get('if-none-match') ?? undefined
  return headers['if-none-match']
}
