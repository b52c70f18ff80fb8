import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'

/**
 * The upstream's bodies, as far as this service reads them: only the fields it uses, checked
 * before use (GitHub's OpenAPI description, `@octokit/openapi-types`, names the types; extra
 * fields are allowed and ignored). A body that fails is the upstream's fault, not ours.
 */

/** A field the upstream may leave out or send as null. */
const Maybe = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]))

/** `GET /users/{user}` (`public-user`). */
export const UpstreamUser = Type.Object({
  login: Type.String(),
  name: Maybe(Type.String()),
  bio: Maybe(Type.String()),
  location: Maybe(Type.String()),
  company: Maybe(Type.String()),
  blog: Maybe(Type.String()),
  avatar_url: Type.String(),
  html_url: Type.String(),
  public_repos: Type.Integer({ minimum: 0 }),
  followers: Type.Integer({ minimum: 0 }),
  following: Type.Integer({ minimum: 0 }),
  created_at: Type.String(),
  updated_at: Type.String(),
})

/** One repository of a list (`minimal-repository`, `repository`). */
export const UpstreamRepo = Type.Object({
  name: Type.String(),
  full_name: Type.String(),
  description: Maybe(Type.String()),
  html_url: Type.String(),
  stargazers_count: Type.Optional(Type.Integer({ minimum: 0 })),
  forks_count: Type.Optional(Type.Integer({ minimum: 0 })),
  language: Maybe(Type.String()),
  updated_at: Maybe(Type.String()),
  topics: Type.Optional(Type.Array(Type.String())),
  private: Type.Boolean(),
  fork: Type.Boolean(),
})

/** `GET /users/{user}/repos`, `GET /user/repos`. */
export const UpstreamRepos = Type.Array(UpstreamRepo)

/** `GET /installation/repositories`: one page of the installation's repositories. */
export const UpstreamInstallationRepos = Type.Object({ total_count: Type.Integer({ minimum: 0 }), repositories: UpstreamRepos })

/** One follower (`simple-user`). */
export const UpstreamFollower = Type.Object({
  login: Type.String(),
  id: Type.Integer(),
  avatar_url: Type.String(),
  html_url: Type.String(),
  type: Type.String(),
})

/** `GET /users/{user}/followers`. */
export const UpstreamFollowers = Type.Array(UpstreamFollower)

/** `GET /search/issues`: only the count is read. */
export const UpstreamSearchResult = Type.Object({ total_count: Type.Integer({ minimum: 0 }) })

/** `GET /repos/{owner}/{repo}` (`full-repository`). */
export const UpstreamRepository = Type.Object({
  stargazers_count: Type.Integer({ minimum: 0 }),
  forks_count: Type.Integer({ minimum: 0 }),
  private: Type.Boolean(),
})

/** `GET /user`: whose token this is. */
export const UpstreamAuthenticatedUser = Type.Object({ login: Type.String() })

export type UpstreamUser = Static<typeof UpstreamUser>
export type UpstreamRepo = Static<typeof UpstreamRepo>
export type UpstreamRepos = Static<typeof UpstreamRepos>
export type UpstreamFollower = Static<typeof UpstreamFollower>
export type UpstreamSearchResult = Static<typeof UpstreamSearchResult>
export type UpstreamRepository = Static<typeof UpstreamRepository>
export type UpstreamAuthenticatedUser = Static<typeof UpstreamAuthenticatedUser>

/** Each body's check, compiled once. */
export const upstreamBodies = {
  user: TypeCompiler.Compile(UpstreamUser),
  repos: TypeCompiler.Compile(UpstreamRepos),
  installationRepos: TypeCompiler.Compile(UpstreamInstallationRepos),
  followers: TypeCompiler.Compile(UpstreamFollowers),
  search: TypeCompiler.Compile(UpstreamSearchResult),
  repository: TypeCompiler.Compile(UpstreamRepository),
  authenticatedUser: TypeCompiler.Compile(UpstreamAuthenticatedUser),
} satisfies Record<string, TypeCheck<TSchema>>
