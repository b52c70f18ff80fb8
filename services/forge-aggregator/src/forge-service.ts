import type { FastifyBaseLogger } from 'fastify'
import { describeError } from '@repo/http-errors'
import { upstreamPath, type ForgeClient } from './forge-client.ts'
import { UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from './upstream-errors.ts'
import { buildUserOverview, countedRepos, MAX_PER_PAGE, pagesFor, toRepository, toRepositoryCounts } from './aggregate.ts'
import type {
  UpstreamAuthenticatedRepos,
  UpstreamAuthenticatedUser,
  UpstreamFollowers,
  UpstreamOwnedRepos,
  UpstreamRepo,
  UpstreamRepository,
  UpstreamSearchResult,
  UpstreamUser,
} from './upstream-types.ts'
import type { UserOverview } from './routes/users.schema.ts'
import type { RepositoryCounts, RepositoryList } from './routes/repos.schema.ts'

export interface ForgeServiceOptions {
  client: ForgeClient
  followersLimit: number
  maxRepoPages: number
  /** Whether the client sends a token, so list mode may ask whose it is. */
  hasToken: boolean
}

/** A users answer and the statistics it could not fill (`totalIssues`, `totalPRs`). */
export interface UserOverviewResult {
  overview: UserOverview
  missing: string[]
}

/** One repository's counts, and whether it is private (its answer may then only be cached privately). */
export interface RepositoryCountsResult {
  counts: RepositoryCounts
  isPrivate: boolean
}

/**
 * What each endpoint asks the upstream for (DESIGN §4), and how the answers combine. `log` is
 * the request's logger: every line about its upstream calls carries its request id.
 */
export interface ForgeService {
  userOverview(login: string, log: FastifyBaseLogger): Promise<UserOverviewResult>
  repositoryCounts(owner: string, repo: string, log: FastifyBaseLogger): Promise<RepositoryCountsResult>
  repositoryList(owner: string, log: FastifyBaseLogger): Promise<RepositoryList>
}

export function createForgeService(options: ForgeServiceOptions): ForgeService {
  const { client, followersLimit, maxRepoPages } = options
  let tokenOwner: Promise<string | undefined> | undefined

  function reposPage(login: string, page: number, log: FastifyBaseLogger) {
    return client
      .get<UpstreamOwnedRepos>(upstreamPath`/users/${login}/repos`, { type: 'owner', per_page: MAX_PER_PAGE, page }, log)
      .then(asList)
  }

  /** The search's `total_count`, or undefined when the search failed: a count is not worth failing for. */
  async function searchCount(login: string, kind: 'issue' | 'pr', log: FastifyBaseLogger): Promise<number | undefined> {
    try {
      const result = await client.get<UpstreamSearchResult>('/search/issues', { q: `author:${login} is:${kind}`, per_page: 1 }, log)
      return result.total_count
    } catch (error) {
      log.warn({ error: describeError(error) }, `${kind} search failed; its count will be 0`)
      return undefined
    }
  }

  /** Who owns the token, asked once per process; a failed answer is not remembered. */
  function whoOwnsTheToken(log: FastifyBaseLogger): Promise<string | undefined> {
    tokenOwner ??= client.get<UpstreamAuthenticatedUser>('/user', undefined, log).then(
      (user) => user.login,
      (error: unknown) => {
        log.warn({ error: describeError(error) }, 'could not tell who owns FORGE_TOKEN; listing public repositories')
        tokenOwner = undefined
        return undefined
      },
    )
    return tokenOwner
  }

  return {
    async userOverview(login, log) {
      // The five calls start together; further repository pages start as soon as the profile
      // says they exist. One request costs about one upstream round trip.
      const profileCall = client.get<UpstreamUser>(upstreamPath`/users/${login}`, undefined, log)
      const reposCall = Promise.all([
        reposPage(login, 1, log),
        profileCall.then((profile) => {
          const pages = pagesFor(profile.public_repos, maxRepoPages)
          return Promise.all(Array.from({ length: pages - 1 }, (_, index) => reposPage(login, index + 2, log)))
        }),
      ]).then(([first, rest]): UpstreamRepo[] => [first, ...rest].flat())
      const followersCall = client
        .get<UpstreamFollowers>(upstreamPath`/users/${login}/followers`, { per_page: followersLimit }, log)
        .then(asList)
      const issuesCall = searchCount(login, 'issue', log)
      const prsCall = searchCount(login, 'pr', log)

      const [profile, repos, followers] = await settleInOrder([profileCall, reposCall, followersCall] as const)
      const [totalIssues, totalPRs] = await Promise.all([issuesCall, prsCall])
      return {
        overview: buildUserOverview({
          profile,
          repos: countedRepos(repos),
          followers,
          totalIssues: totalIssues ?? 0,
          totalPRs: totalPRs ?? 0,
        }),
        missing: [...(totalIssues === undefined ? ['totalIssues'] : []), ...(totalPRs === undefined ? ['totalPRs'] : [])],
      }
    },

    async repositoryCounts(owner, repo, log) {
      const repository = await client.get<UpstreamRepository>(upstreamPath`/repos/${owner}/${repo}`, undefined, log)
      return { counts: toRepositoryCounts(repository), isPrivate: repository.private }
    },

    async repositoryList(owner, log) {
      const query = { sort: 'updated', per_page: MAX_PER_PAGE }
      const isTokenOwner = options.hasToken && (await whoOwnsTheToken(log))?.toLowerCase() === owner.toLowerCase()
      const repos = asList(
        isTokenOwner
          ? await client.get<UpstreamAuthenticatedRepos>('/user/repos', { affiliation: 'owner', ...query }, log)
          : await client.get<UpstreamOwnedRepos>(upstreamPath`/users/${owner}/repos`, query, log),
      )
      return { repos: repos.map(toRepository), totalCount: repos.length }
    },
  }
}

/** A list endpoint's body, which must be a list: an object here is an upstream fault, not a bug of ours. */
function asList<List extends readonly unknown[]>(body: List): List {
  if (!Array.isArray(body)) throw new UpstreamFailure('Upstream sent an unexpected body')
  return body
}

/**
 * Waits for every call, then resolves to their results, or rejects with the failure that best
 * explains them all, whichever finished first: the profile's own error (404 means "user not
 * found"), else a rate limit, else a 404, else the first failure in call order.
 */
async function settleInOrder<const Calls extends readonly Promise<unknown>[]>(
  calls: Calls,
): Promise<{ -readonly [Index in keyof Calls]: Awaited<Calls[Index]> }> {
  const settled = await Promise.allSettled(calls)
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
