import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { RepositoryCounts, RepositoryList } from '../forge/answers.ts'
import { invalidRequest, upstreamErrorAnswer } from './errors.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited, withCacheHeaders } from './schemas.ts'
import type { ForgeRouteOptions } from './users.ts'

/**
 * The `GET /api/forge/repos` route: one repository's counts, or the list of the default user's
 * repositories.
 */

export const ReposQuery = Type.Object({
  repo_name: Type.Optional(
    Type.String({
      // 1–100 of A-Za-z0-9._- and not "." or "..": a name, never a path.
      pattern: '^(?!\\.\\.?$)[A-Za-z0-9._-]{1,100}$',
      description: 'one repository of FORGE_DEFAULT_USER; omitted: the list of its repositories',
    }),
  ),
})

/** The 200 answer: one repository's counts, or the list; with the headers it carries. */
export const RepositoryAnswer = withCacheHeaders(Type.Union([RepositoryCounts, RepositoryList]))

const ONE_REPOSITORY = upstreamErrorAnswer({ notFound: 'Repository not found', failure: 'Failed to fetch repository' })
const REPOSITORY_LIST = upstreamErrorAnswer({ notFound: 'User not found', failure: 'Failed to fetch repositories' })

/** GET /api/forge/repos: one repository of the default user, or its list → `reply.sendAnswer`. */
export const repoRoutes: FastifyPluginAsyncTypebox<ForgeRouteOptions> = async (app, { defaultUser }) => {
  app.get(
    '/api/forge/repos',
    {
      schema: {
        summary: "One repository's stars and forks, or the owner's repositories",
        description: 'The owner is FORGE_DEFAULT_USER. With repo_name: {stars, forksCount}; without: {repos, totalCount}.',
        querystring: ReposQuery,
        response: {
          200: RepositoryAnswer,
          304: NotModified,
          400: ErrorBody,
          403: RateLimited,
          404: ErrorBody,
          500: FailureBody,
        },
      },
      schemaErrorFormatter: () => invalidRequest('Invalid repo_name'),
    },
    (request, reply) => {
      const owner = defaultUser.toLowerCase()
      const repo = request.query.repo_name
      if (repo === undefined) {
        return reply.sendAnswer({
          endpoint: 'repos',
          key: `repos/${owner}`,
          produce: (context) => app.forge.service.repositoryList(defaultUser, context),
          errorAnswer: REPOSITORY_LIST,
        })
      }
      return reply.sendAnswer({
        endpoint: 'repos',
        key: `repo/${owner}/${repo.toLowerCase()}`,
        produce: (context) => app.forge.service.repositoryCounts(defaultUser, repo, context),
        errorAnswer: ONE_REPOSITORY,
      })
    },
  )
}
