import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { ForgeService } from '../forge-service.ts'
import type { ResponseCache } from '../response-cache.ts'
import { sendCachedAnswer } from '../http-caching.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited } from './common.schema.ts'
import { invalidRequest, orUpstreamAnswer } from './upstream-answers.ts'
import { UserAnswer, UsersQuery } from './users.schema.ts'

export interface ForgeRouteOptions {
  service: ForgeService
  cache: ResponseCache
  defaultUser: string
}

const MESSAGES = { notFound: 'User not found', failure: 'Failed to fetch forge data' }

export const userRoutes: FastifyPluginAsyncTypebox<ForgeRouteOptions> = async (app, { service, cache, defaultUser }) => {
  app.get(
    '/api/forge/users',
    {
      schema: {
        summary: "One user's profile, statistics, followers and top repositories",
        querystring: UsersQuery,
        response: { 200: UserAnswer, 304: NotModified, 400: ErrorBody, 403: RateLimited, 404: ErrorBody, 500: FailureBody },
      },
      // The spec's words name the parameter, not the rule it broke.
      schemaErrorFormatter: () => invalidRequest('Invalid user_name'),
    },
    async (request, reply) => {
      const login = request.query.user_name ?? defaultUser
      // Logins are case-insensitive upstream: one cache entry per user, however it is spelled.
      const key = `users/${login.toLowerCase()}`
      const answer = cache.fresh(key, 'users') ?? (await orUpstreamAnswer(cache.get(key, produce, { endpoint: 'users', log: request.log }), MESSAGES))
      return sendCachedAnswer(request, reply, cache, answer)

      async function produce() {
        const { overview, missing } = await service.userOverview(login, request.log)
        return { body: reply.serializeInput(overview, '200') as string, partial: missing }
      }
    },
  )
}
