import { Type, type Static } from '@sinclair/typebox'
import { CachedAnswer, Nullable } from './http.ts'

export const ReposQuery = Type.Object({
  repo_name: Type.Optional(
    Type.String({
      // 1–100 of A-Za-z0-9._- and not "." or "..": a name, never a path.
      pattern: '^(?!\\.\\.?$)[A-Za-z0-9._-]{1,100}$',
      description: 'one repository of FORGE_DEFAULT_USER; omitted: the list of its repositories',
    }),
  ),
})

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

export const RepositoryList = Type.Object({
  repos: Type.Array(Repository, { maxItems: 100 }),
  totalCount: Type.Integer({ description: 'repositories returned' }),
})

/** The 200 answer: one repository's counts, or the list; with the headers it carries. */
export const RepositoryAnswer = CachedAnswer(Type.Union([RepositoryCounts, RepositoryList]))

export type RepositoryCounts = Static<typeof RepositoryCounts>
export type Repository = Static<typeof Repository>
export type RepositoryList = Static<typeof RepositoryList>
