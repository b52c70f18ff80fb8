import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { sendCachedAnswer } from '../http-caching.ts'
import type { ProducedAnswer } from '../response-cache.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited } from './common.schema.ts'
import { RepositoryAnswer, ReposQuery } from './repos.schema.ts'
import { invalidRequest, orUpstreamAnswer } from './upstream-answers.ts'
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
      schemaErrorFormatter: () => invalidRequest('Invalid repo_name'),
    },
    async (request, reply) => {
      const owner = defaultUser.toLowerCase()
      const repo = request.query.repo_name
      const key = repo === undefined ? `repos/${owner}` : `repo/${owner}/${repo.toLowerCase()}`
      const messages = repo === undefined ? REPOSITORY_LIST : ONE_REPOSITORY
      const answer = cache.fresh(key, 'repos') ?? (await orUpstreamAnswer(cache.get(key, produce, { endpoint: 'repos', log: request.log }), messages))
      return sendCachedAnswer(request, reply, cache, answer)

      async function produce(): Promise<ProducedAnswer> {
        if (repo === undefined) {
          const list = await service.repositoryList(defaultUser, request.log)
          const isPrivate = list.repos.some((repository) => repository.isPrivate)
          return { body: reply.serializeInput(list, '200') as string, partial: [], isPrivate }
        }
        const { counts, isPrivate } = await service.repositoryCounts(defaultUser, repo, request.log)
        return { body: reply.serializeInput(counts, '200') as string, partial: [], isPrivate }
      }
    },
  )
}
