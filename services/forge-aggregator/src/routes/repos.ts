import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { sendCachedResponse } from '../http-caching.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited } from './common.schema.ts'
import { RepositoryAnswer, ReposQuery } from './repos.schema.ts'
import { orUpstreamAnswer } from './upstream-answers.ts'
import type { ForgeRouteOptions } from './users.ts'

const ONE_REPOSITORY = { notFound: 'Repository not found', failure: 'Failed to fetch repository' }
const REPOSITORY_LIST = { notFound: 'User not found', failure: 'Failed to fetch repositories' }

export const repoRoutes: FastifyPluginAsyncTypebox<ForgeRouteOptions> = async (app, { service, cache, defaultUser }) => {
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
      schemaErrorFormatter: () => new Error('Invalid repo_name'),
    },
    async (request, reply) => {
      const owner = defaultUser.toLowerCase()
      const repo = request.query.repo_name
      const response =
        repo === undefined
          ? await cache.get(`repos/${owner}`, async () => {
              const list = await orUpstreamAnswer(service.repositoryList(defaultUser), REPOSITORY_LIST)
              return { body: reply.serializeInput(list, '200') as string, partial: [] }
            })
          : await cache.get(`repo/${owner}/${repo.toLowerCase()}`, async () => {
              const counts = await orUpstreamAnswer(service.repositoryCounts(defaultUser, repo), ONE_REPOSITORY)
              return { body: reply.serializeInput(counts, '200') as string, partial: [] }
            })
      return sendCachedResponse(request, reply, cache, response)
    },
  )
}
