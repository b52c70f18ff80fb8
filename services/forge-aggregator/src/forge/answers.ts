import { Type, type Static, type TSchema } from '@sinclair/typebox'

/**
 * The bodies of the answers the service makes out of the upstream's (`aggregate.ts`). The routes
 * serialize and document them with these schemas; the key of every field is always present.
 */

/** A field the upstream may give as null: returned as null, key present. */
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

export const ForgeUser = Type.Object({
  login: Type.String(),
  name: Nullable(Type.String()),
  bio: Nullable(Type.String()),
  location: Nullable(Type.String()),
  company: Nullable(Type.String()),
  blog: Nullable(Type.String()),
  avatar_url: Type.String(),
  html_url: Type.String(),
  public_repos: Type.Integer(),
  followers: Type.Integer(),
  following: Type.Integer(),
  created_at: Type.String(),
  updated_at: Type.String(),
})

export const Stats = Type.Object({
  totalStars: Type.Integer({ description: 'stars of the counted repositories that are not forks' }),
  totalForks: Type.Integer({ description: 'forks of every counted repository' }),
  totalIssues: Type.Integer({ description: '0 when the issue search failed (see X-Forge-Partial)' }),
  totalPRs: Type.Integer({ description: '0 when the pull-request search failed (see X-Forge-Partial)' }),
  publicRepos: Type.Integer({ description: "the profile's public_repos" }),
  totalRepos: Type.Integer({ description: 'public owned repositories counted (fewer only if FORGE_MAX_REPO_PAGES cut the list)' }),
  followersCount: Type.Integer(),
  followingCount: Type.Integer(),
})

export const Follower = Type.Object({
  login: Type.String(),
  id: Type.Integer(),
  avatar_url: Type.String(),
  html_url: Type.String(),
  type: Type.String({ description: 'User or Organization' }),
})

export const TopRepo = Type.Object({
  name: Type.String(),
  full_name: Type.String(),
  description: Nullable(Type.String()),
  html_url: Type.String(),
  stargazers_count: Type.Integer(),
  forks_count: Type.Integer(),
  language: Nullable(Type.String()),
  updated_at: Nullable(Type.String()),
  topics: Type.Array(Type.String()),
})

/** `GET /api/forge/users`. */
export const UserOverview = Type.Object({
  user: ForgeUser,
  stats: Stats,
  followers: Type.Array(Follower),
  topRepos: Type.Array(TopRepo, { maxItems: 10, description: 'by stargazers_count descending, ties by name' }),
})

/** `GET /api/forge/repos?repo_name=…`. */
export const RepositoryCounts = Type.Object({
  stars: Type.Integer(),
  forksCount: Type.Integer(),
})

export const Repository = Type.Object({
  name: Type.String(),
  fullName: Type.String(),
  description: Nullable(Type.String()),
  stars: Type.Integer(),
  forksCount: Type.Integer(),
  language: Nullable(Type.String()),
  url: Type.String(),
  updatedAt: Nullable(Type.String()),
  isPrivate: Type.Boolean(),
})

/** `GET /api/forge/repos`. */
export const RepositoryList = Type.Object({
  repos: Type.Array(Repository, { maxItems: 100 }),
  totalCount: Type.Integer({ description: 'repositories returned' }),
})

export type ForgeUser = Static<typeof ForgeUser>
export type Stats = Static<typeof Stats>
export type Follower = Static<typeof Follower>
export type TopRepo = Static<typeof TopRepo>
export type UserOverview = Static<typeof UserOverview>
export type RepositoryCounts = Static<typeof RepositoryCounts>
export type Repository = Static<typeof Repository>
export type RepositoryList = Static<typeof RepositoryList>
