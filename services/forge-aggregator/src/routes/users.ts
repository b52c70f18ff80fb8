import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { invalidRequest } from '../upstream-answers.ts'
import { ErrorBody, FailureBody, NotModified, RateLimited } from '../schemas/http.ts'
import { UserAnswer, UsersQuery } from '../schemas/users.ts'

export interface ForgeRouteOptions {
  /** `FORGE_DEFAULT_USER`. */
  defaultUser: string
}

const MESSAGES = { notFound: 'User not found', failure: 'Failed to fetch forge data' }

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
        produce: (call) => app.forge.userOverview(login, call),
        messages: MESSAGES,
      })
    },
  )
}
