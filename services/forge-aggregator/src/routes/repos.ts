import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { invalidRequest } from '../upstream-answers.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited } from '../schemas/http.ts'
import { RepositoryAnswer, ReposQuery } from '../schemas/repos.ts'
import type { ForgeRouteOptions } from './users.ts'

const ONE_REPOSITORY = { notFound: 'Repository not found', failure: 'Failed to fetch repository' }
const REPOSITORY_LIST = { notFound: 'User not found', failure: 'Failed to fetch repositories' }

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
          produce: (call) => app.forge.repositoryList(defaultUser, call),
          messages: REPOSITORY_LIST,
        })
      }
      return reply.sendAnswer({
        endpoint: 'repos',
        key: `repo/${owner}/${repo.toLowerCase()}`,
        produce: (call) => app.forge.repositoryCounts(defaultUser, repo, call),
        messages: ONE_REPOSITORY,
      })
    },
  )
}
