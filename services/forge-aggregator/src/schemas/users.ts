import { Type, type Static } from '@sinclair/typebox'
import { LOGIN_PATTERN } from '../config.ts'
import { CachedAnswer, Nullable } from './http.ts'

export const UsersQuery = Type.Object({
  user_name: Type.Optional(Type.String({ pattern: LOGIN_PATTERN, description: 'defaults to FORGE_DEFAULT_USER' })),
})

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

export const UserOverview = Type.Object({
  user: ForgeUser,
  stats: Stats,
  followers: Type.Array(Follower),
  topRepos: Type.Array(TopRepo, { maxItems: 10, description: 'by stargazers_count descending, ties by name' }),
})

/** The 200 answer, with the headers it carries. */
export const UserAnswer = CachedAnswer(UserOverview, {
  'X-Forge-Partial': {
    type: 'string',
    description: 'present when the issue or pull-request search failed: the missing fields (totalIssues, totalPRs), comma-separated',
  },
})

export type ForgeUser = Static<typeof ForgeUser>
export type Stats = Static<typeof Stats>
export type Follower = Static<typeof Follower>
export type TopRepo = Static<typeof TopRepo>
export type UserOverview = Static<typeof UserOverview>
