import type { Credentials } from '../credentials/credentials.ts'
import type { ForgeClient } from '../upstream/client.ts'
import { upstreamPath } from '../upstream/endpoint.ts'
import { UpstreamNotFound, UpstreamRateLimited } from '../upstream/errors.ts'
import type { RequestContext } from '../upstream/request-context.ts'
import { buildUserOverview, countedRepos, MAX_PER_PAGE, pagesFor, toRepository, toRepositoryCounts } from './aggregate.ts'
import type { RepositoryCounts, RepositoryList, UserOverview } from './answers.ts'
import { upstreamBodies, type UpstreamRepo, type UpstreamRepos } from './bodies.ts'

/**
 * What each endpoint asks the upstream for, and how the answers combine (docs/design.md,
 * "Upstream calls").
 */

export interface ForgeServiceOptions {
  client: ForgeClient
  /** Whose account the default installation is on (list mode). */
  credentials: Pick<Credentials, 'defaultInstallationOwner'>
  followersLimit: number
  maxRepoPages: number
  /**
   * How the client authenticates, so list mode knows how to ask for the owner's private
   * repositories: with a token, `/user/repos` when the token is the owner's; as an App,
   * `/installation/repositories` when the installation is on the owner's account.
   */
  authentication: 'anonymous' | 'token' | 'app'
  /**
   * A public GitHub App: a `users` answer's calls are about its login (`RequestContext.account`),
   * so they go with that account's installation, whose token may reach its private repositories:
   * the searches then say `is:public`, counting what an anonymous caller would.
   */
  publicApp?: boolean
}

/**
 * An answer as producing makes it: its body (the object the upstream's calls make, then the text
 * it is serialized to once, as it is kept and sent) and what it holds.
 */
export interface Produced<Body> {
  body: Body
  /** Statistics it could not fill (`totalIssues`, `totalPRs`). */
  partial: readonly string[]
  /** Whether it shows a private repository: then only the caller may keep it. */
  isPrivate: boolean
  /**
   * When every missing statistic is missing because its rate limit is spent: when that limit
   * resets (wall clock, ms). Such a partial answer may be reused until then; any other is not kept.
   */
  partialUntil?: number | undefined
}

/**
 * What each endpoint asks the upstream for (docs/design.md, "Upstream calls"), and how the answers
 * combine. `context` is the request's: every line about its upstream calls carries its request id,
 * and the budget may refuse the calls of one that revalidates.
 */
export interface ForgeService {
  userOverview(login: string, context: RequestContext): Promise<Produced<UserOverview>>
  repositoryCounts(owner: string, repo: string, context: RequestContext): Promise<Produced<RepositoryCounts>>
  repositoryList(owner: string, context: RequestContext): Promise<Produced<RepositoryList>>
}

/** A search's count, or why it is missing. */
interface SearchOutcome {
  count: number | undefined
  /** When a missing count may be asked again: its rate limit's reset, when that is why it is missing. */
  resumesAt?: number | undefined
}

export function createForgeService(options: ForgeServiceOptions): ForgeService {
  const lists = repositoryLists(options)
  return {
    userOverview: (login, context) => userOverview(options, login, context),
    async repositoryCounts(owner, repo, context) {
      const repository = await options.client.get(upstreamPath`/repos/${owner}/${repo}`, upstreamBodies.repository, undefined, context)
      return { body: toRepositoryCounts(repository), partial: [], isPrivate: repository.private }
    },
    async repositoryList(owner, context) {
      const repos = await lists.reposOf(owner, context)
      const list = { repos: repos.map(toRepository), totalCount: repos.length }
      return { body: list, partial: [], isPrivate: list.repos.some((repository) => repository.isPrivate) }
    },
  }
}

/** A `users` answer: the profile, every repository page, the followers and the two searches, started together. */
async function userOverview(options: ForgeServiceOptions, login: string, requestContext: RequestContext): Promise<Produced<UserOverview>> {
  const { client, followersLimit, maxRepoPages } = options
  // Every call is about this account: a public App calls with its installation.
  const context = { ...requestContext, account: login }
  const reposPage = (page: number) => client.get(upstreamPath`/users/${login}/repos`, upstreamBodies.repos, { type: 'owner', per_page: MAX_PER_PAGE, page }, context)
  // The five calls start together; further repository pages start as soon as the profile
  // says they exist. One request costs about one upstream round trip.
  const profileBody = client.get(upstreamPath`/users/${login}`, upstreamBodies.user, undefined, context)
  const repoBodies = Promise.all([
    reposPage(1),
    profileBody.then((profile) => {
      const pages = pagesFor(profile.public_repos, maxRepoPages)
      return Promise.all(Array.from({ length: pages - 1 }, (_, index) => reposPage(index + 2)))
    }),
  ]).then(([first, rest]): UpstreamRepo[] => [first, ...rest].flat())
  const followersBody = client.get(upstreamPath`/users/${login}/followers`, upstreamBodies.followers, { per_page: followersLimit }, context)
  const issuesOutcome = searchCount(options, login, 'issue', context)
  const prsOutcome = searchCount(options, login, 'pr', context)

  const [profile, repos, followers] = await allOrMostTellingFailure([profileBody, repoBodies, followersBody] as const)
  const [issues, prs] = await Promise.all([issuesOutcome, prsOutcome])
  const missing = [...(issues.count === undefined ? [['totalIssues', issues] as const] : []), ...(prs.count === undefined ? [['totalPRs', prs] as const] : [])]
  const resumes = missing.map(([, outcome]) => outcome.resumesAt)
  return {
    body: buildUserOverview({ profile, repos: countedRepos(repos), followers, totalIssues: issues.count ?? 0, totalPRs: prs.count ?? 0 }),
    partial: missing.map(([name]) => name),
    isPrivate: false,
    partialUntil: resumes.length > 0 && resumes.every((at) => at !== undefined) ? Math.min(...resumes) : undefined,
  }
}

/**
 * The search's `total_count`, or why not: a count is not worth failing the answer for. A public
 * App's searches say `is:public`: the account's installation token may reach its private
 * repositories, and a card counts what an anonymous caller would.
 */
async function searchCount(options: ForgeServiceOptions, login: string, kind: 'issue' | 'pr', context: RequestContext): Promise<SearchOutcome> {
  const publicOnly = options.publicApp === true ? ' is:public' : ''
  try {
    const result = await options.client.get('/search/issues', upstreamBodies.search, { q: `author:${login} is:${kind}${publicOnly}`, per_page: 1 }, context)
    return { count: result.total_count }
  } catch (error) {
    context.log.warn({ err: error }, `${kind} search failed; its count will be 0`)
    return { count: undefined, resumesAt: error instanceof UpstreamRateLimited ? error.resumesAt : undefined }
  }
}

/**
 * List mode's repositories: the owner's private ones too when they are there to list (their own
 * token, or an installation on their account with all its repositories), else the public list.
 */
function repositoryLists(options: ForgeServiceOptions): { reposOf(owner: string, context: RequestContext): Promise<UpstreamRepos> } {
  const { client, maxRepoPages } = options
  let tokenOwner: Promise<string | undefined> | undefined

  /** Who owns the token, asked once per process; a failed answer is not remembered. */
  function whoOwnsTheToken(context: RequestContext): Promise<string | undefined> {
    tokenOwner ??= client.get('/user', upstreamBodies.authenticatedUser, undefined, context).then(
      (user) => user.login,
      (error: unknown) => {
        context.log.warn({ err: error }, 'could not tell who owns FORGE_TOKEN; listing public repositories')
        tokenOwner = undefined
        return undefined
      },
    )
    return tokenOwner
  }

  /** Whether the owner's private repositories are there to list, and how. */
  async function privateSource(owner: string, context: RequestContext): Promise<'token' | 'installation' | undefined> {
    const isOwner = (login: string | undefined) => login?.toLowerCase() === owner.toLowerCase()
    if (options.authentication === 'token') return isOwner(await whoOwnsTheToken(context)) ? 'token' : undefined
    if (options.authentication === 'app') {
      const installedOn = await options.credentials.defaultInstallationOwner()
      return isOwner(installedOn?.login) && installedOn?.allRepositories ? 'installation' : undefined
    }
    return undefined
  }

  /** Every repository of the installation (up to `maxRepoPages` pages), most recently updated first, as many as one page of the public list. */
  async function installationRepos(context: RequestContext): Promise<UpstreamRepos> {
    const page = (number: number) => client.get('/installation/repositories', upstreamBodies.installationRepos, { per_page: MAX_PER_PAGE, page: number }, context)
    const first = await page(1)
    const rest = await Promise.all(Array.from({ length: pagesFor(first.total_count, maxRepoPages) - 1 }, (_, index) => page(index + 2)))
    // The endpoint takes no `sort`: ordered here as `sort=updated` orders the other lists.
    return [first, ...rest]
      .flatMap((each) => each.repositories)
      .sort((a, b) => lastUpdate(b).localeCompare(lastUpdate(a)))
      .slice(0, MAX_PER_PAGE)
  }

  return {
    async reposOf(owner, context) {
      const query = { sort: 'updated', per_page: MAX_PER_PAGE }
      const source = await privateSource(owner, context)
      if (source === 'token') return client.get('/user/repos', upstreamBodies.repos, { affiliation: 'owner', ...query }, context)
      if (source === 'installation') return installationRepos(context)
      return client.get(upstreamPath`/users/${owner}/repos`, upstreamBodies.repos, query, context)
    },
  }
}

/** When a repository was last updated (ISO 8601, so it sorts as text); never updated sorts last. */
function lastUpdate(repo: UpstreamRepo): string {
  return repo.updated_at ?? ''
}

/**
 * Waits for every body, then resolves to them, or rejects with the failure that best explains
 * them all, whichever finished first: the profile's own error (404 means "user not found"), else
 * a rate limit, else a 404, else the first failure in the order given.
 */
async function allOrMostTellingFailure<const Bodies extends readonly Promise<unknown>[]>(
  bodies: Bodies,
): Promise<{ -readonly [Index in keyof Bodies]: Awaited<Bodies[Index]> }> {
  const settled = await Promise.allSettled(bodies)
  const failures = settled.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []))
  if (failures.length > 0) {
    const first = settled[0]?.status === 'rejected' ? (settled[0].reason as unknown) : undefined
    throw (
      first ??
      failures.find((error) => error instanceof UpstreamRateLimited) ??
      failures.find((error) => error instanceof UpstreamNotFound) ??
      failures[0]
    )
  }
  return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as never
}
