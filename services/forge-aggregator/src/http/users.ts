import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { LOGIN_PATTERN } from '../config.ts'
import { UserOverview } from '../forge/answers.ts'
import { invalidRequest, upstreamErrorAnswer } from './errors.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited, withCacheHeaders } from './schemas.ts'

/**
 * The `GET /api/forge/users` route: a validated login, its cache key and its production, handed to
 * `reply.sendAnswer`.
 */

export interface ForgeRouteOptions {
  /** `FORGE_DEFAULT_USER`. */
  defaultUser: string
}

export const UsersQuery = Type.Object({
  user_name: Type.Optional(Type.String({ pattern: LOGIN_PATTERN, description: 'defaults to FORGE_DEFAULT_USER' })),
})

/** The 200 answer, with the headers it carries. */
export const UserAnswer = withCacheHeaders(UserOverview, {
  'X-Forge-Partial': {
    type: 'string',
    description: 'present when the issue or pull-request search failed: the missing fields (totalIssues, totalPRs), comma-separated',
  },
})

const ERROR_ANSWER = upstreamErrorAnswer({ notFound: 'User not found', failure: 'Failed to fetch forge data' })

/** GET /api/forge/users: a validated login → its key and its production → `reply.sendAnswer`. */
export const userRoutes: FastifyPluginAsyncTypebox<ForgeRouteOptions> = async (app, { defaultUser }) => {
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
    (request, reply) => {
      const login = request.query.user_name ?? defaultUser
      return reply.sendAnswer({
        endpoint: 'users',
        // Logins are case-insensitive upstream: one answer per user, however it is spelled.
        key: `users/${login.toLowerCase()}`,
        produce: (context) => app.forge.service.userOverview(login, context),
        errorAnswer: ERROR_ANSWER,
      })
    },
  )
}
