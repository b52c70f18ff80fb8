import type { Follower, ForgeUser, Repository, RepositoryCounts, Stats, TopRepo, UserOverview } from './answers.ts'
import type { UpstreamFollower, UpstreamRepo, UpstreamRepository, UpstreamUser } from './bodies.ts'

/**
 * Pure functions from upstream bodies to the answers (totals, top repositories, field names): no
 * I/O.
 */

/** At most this many repositories in `topRepos` (spec). */
export const TOP_REPOS_LIMIT = 10
/** The upstream's largest page (`per_page` maximum). */
export const MAX_PER_PAGE = 100

/** How many pages of `MAX_PER_PAGE` hold `publicRepos` repositories: at least 1, at most `maxPages`. */
export function pagesFor(publicRepos: number, maxPages: number): number {
  return Math.min(Math.max(1, Math.ceil(publicRepos / MAX_PER_PAGE)), maxPages)
}

/** The repositories statistics count: public ones (a token could make private ones visible). */
export function countedRepos(repos: readonly UpstreamRepo[]): UpstreamRepo[] {
  return repos.filter((repo) => !repo.private)
}

/** Stars of the repositories that are not forks. */
export function sumStars(repos: readonly UpstreamRepo[]): number {
  return repos.reduce((total, repo) => (repo.fork ? total : total + (repo.stargazers_count ?? 0)), 0)
}

/** Forks of every repository, forks included. */
export function sumForks(repos: readonly UpstreamRepo[]): number {
  return repos.reduce((total, repo) => total + (repo.forks_count ?? 0), 0)
}

/** Up to `TOP_REPOS_LIMIT` repositories by stars, most first; ties by name (code-point order). */
export function pickTopRepos(repos: readonly UpstreamRepo[]): TopRepo[] {
  return [...repos]
    .sort((a, b) => (b.stargazers_count ?? 0) - (a.stargazers_count ?? 0) || compareNames(a.name, b.name))
    .slice(0, TOP_REPOS_LIMIT)
    .map(toTopRepo)
}

function compareNames(a: string, b: string): number {
  if (a === b) return 0
  return a < b ? -1 : 1
}

/** The users response from its upstream parts. `repos` are the counted repositories. */
export function buildUserOverview(parts: {
  profile: UpstreamUser
  repos: readonly UpstreamRepo[]
  followers: readonly UpstreamFollower[]
  totalIssues: number
  totalPRs: number
}): UserOverview {
  const { profile, repos } = parts
  const stats: Stats = {
    totalStars: sumStars(repos),
    totalForks: sumForks(repos),
    totalIssues: parts.totalIssues,
    totalPRs: parts.totalPRs,
    publicRepos: profile.public_repos,
    totalRepos: repos.length,
    followersCount: profile.followers,
    followingCount: profile.following,
  }
  return { user: toForgeUser(profile), stats, followers: parts.followers.map(toFollower), topRepos: pickTopRepos(repos) }
}

export function toForgeUser(profile: UpstreamUser): ForgeUser {
  return {
    login: profile.login,
    name: profile.name ?? null,
    bio: profile.bio ?? null,
    location: profile.location ?? null,
    company: profile.company ?? null,
    blog: profile.blog ?? null,
    avatar_url: profile.avatar_url,
    html_url: profile.html_url,
    public_repos: profile.public_repos,
    followers: profile.followers,
    following: profile.following,
    created_at: profile.created_at,
    updated_at: profile.updated_at,
  }
}

export function toFollower(follower: UpstreamFollower): Follower {
  return {
    login: follower.login,
    id: Number(follower.id),
    avatar_url: follower.avatar_url,
    html_url: follower.html_url,
    type: follower.type,
  }
}

export function toTopRepo(repo: UpstreamRepo): TopRepo {
  return {
    name: repo.name,
    full_name: repo.full_name,
    description: repo.description ?? null,
    html_url: repo.html_url,
    stargazers_count: repo.stargazers_count ?? 0,
    forks_count: repo.forks_count ?? 0,
    language: repo.language ?? null,
    updated_at: repo.updated_at ?? null,
    topics: repo.topics ?? [],
  }
}

/** A repository of the list mode, in the spec's camelCase. */
export function toRepository(repo: UpstreamRepo): Repository {
  return {
    name: repo.name,
    fullName: repo.full_name,
    description: repo.description ?? null,
    stars: repo.stargazers_count ?? 0,
    forksCount: repo.forks_count ?? 0,
    language: repo.language ?? null,
    url: repo.html_url,
    updatedAt: repo.updated_at ?? null,
    isPrivate: repo.private,
  }
}

export function toRepositoryCounts(repo: UpstreamRepository): RepositoryCounts {
  return { stars: repo.stargazers_count, forksCount: repo.forks_count }
}
