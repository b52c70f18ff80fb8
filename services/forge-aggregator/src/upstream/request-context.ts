import type { FastifyBaseLogger } from 'fastify'

/**
 * The request the upstream is asked for: the response cache makes it once per production, and it
 * goes as it is through the service to the client, whose credential and budget read it.
 */
export interface RequestContext {
  /** The request's logger: every line about its upstream calls carries its request id. */
  readonly log: FastifyBaseLogger
  /**
   * The request revalidates an answer that could still be sent stale: below the reserve its calls
   * are not made, so that what is left goes to users never seen (docs/design.md, "Rate-limit budget").
   */
  readonly revalidates: boolean
  /**
   * The account the calls are about (a `users` answer's login): a public GitHub App calls with that
   * account's installation when it has one (docs/github-app.md, "A public App"); ignored otherwise.
   */
  readonly account?: string
}
