import type { operations } from '@octokit/openapi-types'

/** The JSON body of an upstream operation's 200 answer, from GitHub's own OpenAPI description. */
type Json200<Operation extends keyof operations> = operations[Operation] extends {
  responses: { 200: { content: { 'application/json': infer Body } } }
}
  ? Body
  : never

export type UpstreamUser = Json200<'users/get-by-username'>
export type UpstreamOwnedRepos = Json200<'repos/list-for-user'>
export type UpstreamAuthenticatedRepos = Json200<'repos/list-for-authenticated-user'>
export type UpstreamFollowers = Json200<'users/list-followers-for-user'>
export type UpstreamSearchResult = Json200<'search/issues-and-pull-requests'>
export type UpstreamRepository = Json200<'repos/get'>
export type UpstreamAuthenticatedUser = Json200<'users/get-authenticated'>

export type UpstreamRepo = UpstreamOwnedRepos[number] | UpstreamAuthenticatedRepos[number]
export type UpstreamFollower = UpstreamFollowers[number]
