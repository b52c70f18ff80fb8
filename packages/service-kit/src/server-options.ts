import type { FastifyServerOptions } from 'fastify'
import { requestIdOf } from './request-id.ts'

/** A request whose headers and body take longer than this to arrive is answered 408. */
const REQUEST_TIMEOUT_MS = 30_000

/** The Fastify options every service shares, from the variables of `serverSettings`. */
export function serverOptions(config: { TRUST_PROXY?: string | undefined }) {
  return {
    // Its log label stays Fastify's default, `reqId`.
    genReqId: requestIdOf,
    requestTimeout: REQUEST_TIMEOUT_MS,
    trustProxy: trustProxy(config.TRUST_PROXY),
  } satisfies FastifyServerOptions
}

/**
 * `TRUST_PROXY` as Fastify's `trustProxy`: `true` believes every `X-Forwarded-For` hop, a number
 * that many hops, anything else is a list of the proxies' addresses or CIDRs. Unset believes
 * nobody: the client address is the socket's, so a client cannot choose its own.
 */
function trustProxy(value: string | undefined): NonNullable<FastifyServerOptions['trustProxy']> {
  if (value === undefined || value === 'false') return false
  if (value === 'true') return true
  if (/^\d+$/.test(value)) {
    const hops = Number(value)
    return (_address, hop) => hop < hops
  }
  return value.split(',').map((entry) => entry.trim())
}
