import { sign } from 'node:crypto'
import type { Dispatcher } from 'undici'
import { transportFailure } from '../upstream/errors.ts'
import type { Upstream } from '../upstream/endpoint.ts'
import type { AppCredentials } from './settings.ts'

/**
 * The GitHub App's own calls (minting tokens, looking up installations), signed with its JWT.
 * They go straight to the upstream: they spend the App's limit, not an installation's, so they
 * are neither budgeted nor cached.
 */

/**
 * GitHub: set `iat` 60 s in the past against clock drift; `exp` no more than 10 minutes ahead
 * (docs.github.com, "Generating a JSON Web Token (JWT) for a GitHub App"). 9 minutes leaves the
 * same minute of drift on that side.
 */
const JWT_BACKDATE_SECONDS = 60
const JWT_LIFETIME_SECONDS = 9 * 60

/** One call the App makes with its JWT: not an installation call, so neither budgeted nor cached. */
export type AppRequest = (request: { method: 'GET' | 'POST'; path: string; authorization: string }) => Promise<{ statusCode: number; text: string }>

/** A GitHub App JWT (RS256) for `appId`, issued at `nowMs` on the service's clock. */
export function signAppJwt(appId: string, privateKey: AppCredentials['privateKey'], nowMs: number): string {
  const nowSeconds = Math.floor(nowMs / 1000)
  const header = base64url({ alg: 'RS256', typ: 'JWT' })
  const claims = base64url({ iat: nowSeconds - JWT_BACKDATE_SECONDS, exp: nowSeconds + JWT_LIFETIME_SECONDS, iss: appId })
  const signature = sign('sha256', Buffer.from(`${header}.${claims}`), privateKey).toString('base64url')
  return `${header}.${claims}.${signature}`
}

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

/** The App's calls to `upstream` on `dispatcher`, each within `timeoutMs`. Rejects with `UpstreamFailure` when no answer came. */
export function createAppRequests({ origin, basePath, pinned }: Upstream, dispatcher: Dispatcher, timeoutMs: number): AppRequest {
  return async ({ method, path, authorization }) => {
    const signal = AbortSignal.timeout(timeoutMs)
    try {
      const response = await dispatcher.request({ origin, path: `${basePath}${path}`, method, headers: { ...pinned, authorization }, signal })
      return { statusCode: response.statusCode, text: await response.body.text() }
    } catch (error) {
      // An upstream that cannot be reached fails a mint as it fails a call (500 with what
      // happened), not as a fault of ours. A transport error's code quotes no credential.
      throw transportFailure(error, signal.aborted, timeoutMs, (message) => message)
    }
  }
}
