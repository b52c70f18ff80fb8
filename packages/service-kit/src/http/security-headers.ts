// The security headers every answer carries, computed once at startup: they never change from one
// request to the next.
import helmet from 'helmet'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import fp from 'fastify-plugin'

/**
 * Helmet's default policy, minus `upgrade-insecure-requests`: the services speak plain HTTP
 * behind their TLS terminator, and a browser told to upgrade would fetch `/docs`'s scripts over
 * HTTPS from a port that has none. Swagger UI needs nothing more: its page loads its scripts and
 * styles from `/docs` itself, with no inline script, and its validator badge is off.
 */
const CONTENT_SECURITY_POLICY = { directives: { upgradeInsecureRequests: null } }

/**
 * Helmet's headers on every answer, asked of helmet once at startup rather than on every request
 * as @fastify/helmet does: with no nonce and no per-route policy they never change (what that
 * saves: docs/benchmarks.md).
 */
export const securityHeaders = fp(
  async (app) => {
    const headers = securityHeadersOnce()
    app.addHook('onRequest', (_request, reply, done) => {
      reply.headers(headers)
      done()
    })
  },
  { name: 'security-headers', fastify: '5.x' },
)

/**
 * The headers every answer carries: helmet's middleware run once against a response that is never
 * sent. The benchmark's ceilings send the same, as any server must that gives the same answers.
 */
export function securityHeadersOnce(): Record<string, string> {
  const response = new ServerResponse(new IncomingMessage(new Socket()))
  helmet({ contentSecurityPolicy: CONTENT_SECURITY_POLICY })(response.req, response, () => {})
  return Object.fromEntries(Object.entries(response.getHeaders()).map(([name, value]) => [name, String(value)]))
}
