import { sign } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { parseJson } from '../parse-json.ts'
import type { AppCredentials } from './credentials.ts'
import { InstallationUnavailable, UpstreamFailure } from './errors.ts'

/**
 * GitHub: set `iat` 60 s in the past against clock drift; `exp` no more than 10 minutes ahead
 * (docs.github.com, "Generating a JSON Web Token (JWT) for a GitHub App"). 9 minutes leaves the
 * same minute of drift on that side.
 */
const JWT_BACKDATE_SECONDS = 60
const JWT_LIFETIME_SECONDS = 9 * 60
/** An installation token is renewed this long before its `expires_at` (docs/design.md, "GitHub App"). */
export const RENEW_BEFORE_EXPIRY_MS = 5 * 60 * 1000

/** `POST /app/installations/{id}/access_tokens` (201): the token and when it expires. */
const InstallationToken = TypeCompiler.Compile(Type.Object({ token: Type.String({ minLength: 1 }), expires_at: Type.String() }))
/** `GET /app/installations/{id}`: whose account it is installed on, and on which repositories. */
const Installation = TypeCompiler.Compile(
  Type.Object({ account: Type.Object({ login: Type.String() }), repository_selection: Type.Union([Type.Literal('all'), Type.Literal('selected')]) }),
)

/** The installation's account, and whether it gave the App all of its repositories. */
export interface InstallationAccount {
  login: string
  allRepositories: boolean
}

/** One call the App makes with its JWT: not an installation call, so neither budgeted nor cached. */
export type AppRequest = (request: { method: 'GET' | 'POST'; path: string; authorization: string }) => Promise<{ statusCode: number; text: string }>

export interface InstallationTokensOptions {
  app: AppCredentials
  now: () => number
  send: AppRequest
  logger: FastifyBaseLogger
}

/** The installation token of the App's installation, in memory only. */
export interface InstallationTokens {
  /** The token to call with now: the one held, or a new one when it is within 5 minutes of expiry. Throws `UpstreamFailure`. */
  current(): Promise<string>
  /** The upstream refused `token` (401): the next `current()` is a new token, however many calls were refused with it. */
  refused(token: string): void
  /** The installation was deleted or suspended (a webhook said so): the next `current()` is a new token. */
  forget(): void
  /** The installation's account, asked once with the JWT and remembered once known; undefined when it cannot be told. */
  account(): Promise<InstallationAccount | undefined>
  /** Every credential this process holds now, for redaction. */
  secrets(): string[]
  /** Whether a token is held now (`forge_app_installation_tokens_held`). */
  held(): boolean
}

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

/**
 * Installation tokens for `app` (docs/design.md, "GitHub App"): minted with a fresh JWT at
 * `POST /app/installations/{id}/access_tokens`, held in memory only, renewed 5 minutes before their
 * `expires_at` or when the upstream refuses them; concurrent renewals share one call.
 */
export function createInstallationTokens({ app, now, send, logger }: InstallationTokensOptions): InstallationTokens {
  const installationPath = `/app/installations/${encodeURIComponent(app.installationId)}`
  let held: { token: string; renewAt: number } | undefined
  let renewal: Promise<string> | undefined
  let account: Promise<InstallationAccount | undefined> | undefined
  let lastJwt = ''
  /** The token before the one held: a late failure may still quote it. */
  let previous = ''

  function jwt(): string {
    lastJwt = signAppJwt(app.appId, app.privateKey, now())
    return `Bearer ${lastJwt}`
  }

  async function mint(): Promise<string> {
    const { statusCode, text } = await send({ method: 'POST', path: `${installationPath}/access_tokens`, authorization: jwt() })
    const body = statusCode === 201 ? parseJson(text) : undefined
    if (!InstallationToken.Check(body)) {
      // The upstream's words are not repeated: a refusal may quote what it was sent.
      const message = `GitHub App installation token request answered ${statusCode}${statusCode === 201 ? ' with an unexpected body' : ''}`
      throw statusCode === 404 || statusCode === 403 ? new InstallationUnavailable(message, statusCode) : new UpstreamFailure(message, statusCode)
    }
    const expiresAt = Date.parse(body.expires_at)
    previous = held?.token ?? previous
    held = { token: body.token, renewAt: expiresAt - RENEW_BEFORE_EXPIRY_MS }
    logger.info({ installation: app.installationId, expiresAt: body.expires_at }, 'GitHub App installation token obtained')
    return body.token
  }

  return {
    current() {
      if (held && now() < held.renewAt) return Promise.resolve(held.token)
      renewal ??= mint().finally(() => (renewal = undefined))
      return renewal
    },
    refused(token) {
      if (held?.token === token) {
        previous = token
        held = undefined
      }
    },
    forget() {
      previous = held?.token ?? previous
      held = undefined
    },
    account() {
      account ??= send({ method: 'GET', path: installationPath, authorization: jwt() })
        .then(({ statusCode, text }) => {
          const body = statusCode === 200 ? parseJson(text) : undefined
          if (Installation.Check(body)) return { login: body.account.login, allRepositories: body.repository_selection === 'all' }
          throw new UpstreamFailure(`GitHub App installation request answered ${statusCode}`, statusCode)
        })
        .catch((error: unknown) => {
          logger.warn({ err: error }, 'could not tell whose account the GitHub App is installed on; listing public repositories')
          account = undefined
          return undefined
        })
      return account
    },
    secrets: () => [held?.token ?? '', previous, lastJwt].filter((secret) => secret !== ''),
    held: () => held !== undefined,
  }
}
