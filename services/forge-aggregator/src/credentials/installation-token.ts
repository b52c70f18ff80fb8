import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { parseJson } from '../parse-json.ts'
import { InstallationUnavailable, UpstreamFailure } from '../upstream/errors.ts'
import { signAppJwt, type AppRequest } from './app-calls.ts'
import type { AppCredentials } from './settings.ts'

/**
 * One installation's tokens (docs/github-app.md, "A public App", and docs/design.md, "GitHub
 * App"): minted with the App's JWT, kept in memory only, renewed before they expire.
 */

/** An installation token is renewed this long before its `expires_at` (docs/design.md, "GitHub App"). */
export const RENEW_BEFORE_EXPIRY_MS = 5 * 60 * 1000

/** `POST /app/installations/{id}/access_tokens` (201): the token and when it expires. */
const InstallationToken = TypeCompiler.Compile(Type.Object({ token: Type.String({ minLength: 1 }), expires_at: Type.String() }))
/** `GET /app/installations/{id}`: whose account it is installed on, and on which repositories. */
const Installation = TypeCompiler.Compile(
  Type.Object({ account: Type.Object({ login: Type.String() }), repository_selection: Type.Union([Type.Literal('all'), Type.Literal('selected')]) }),
)

/** The account an installation is on, and whether it gave the App all of its repositories. */
export interface InstallationOwner {
  login: string
  allRepositories: boolean
}

export interface InstallationTokensOptions {
  app: AppCredentials
  now: () => number
  send: AppRequest
  logger: FastifyBaseLogger
}

/** The installation token of the App's installation, in memory only. */
export interface InstallationTokens {
  /** The token to call with now: the one in memory, or a new one when it is within 5 minutes of expiry. Throws `UpstreamFailure`. */
  current(): Promise<string>
  /** The upstream refused `token` (401): the next `current()` is a new token, however many calls were refused with it. */
  refused(token: string): void
  /** The installation was deleted or suspended (a webhook said so): the next `current()` is a new token. */
  forget(): void
  /** The installation's account, asked once with the JWT and remembered once known; undefined when it cannot be told. */
  owner(): Promise<InstallationOwner | undefined>
  /** Every credential this process holds now, for redaction. */
  secrets(): string[]
  /** Whether a token is in memory now (`forge_app_installation_tokens_held`). */
  hasToken(): boolean
}

/**
 * Installation tokens for `app` (docs/design.md, "GitHub App"): minted with a fresh JWT at
 * `POST /app/installations/{id}/access_tokens`, kept in memory only, renewed 5 minutes before their
 * `expires_at` or when the upstream refuses them; concurrent renewals share one call.
 */
export function createInstallationTokens({ app, now, send, logger }: InstallationTokensOptions): InstallationTokens {
  const installationPath = `/app/installations/${encodeURIComponent(app.installationId)}`
  /** The last token minted, and when to renew it. */
  let minted: { token: string; renewAt: number } | undefined
  let renewal: Promise<string> | undefined
  let owner: Promise<InstallationOwner | undefined> | undefined
  let lastJwt = ''
  /** The token before the one minted last: a late failure may still quote it. */
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
    previous = minted?.token ?? previous
    minted = { token: body.token, renewAt: expiresAt - RENEW_BEFORE_EXPIRY_MS }
    logger.info({ installation: app.installationId, expiresAt: body.expires_at }, 'GitHub App installation token obtained')
    return body.token
  }

  return {
    current() {
      if (minted && now() < minted.renewAt) return Promise.resolve(minted.token)
      renewal ??= mint().finally(() => (renewal = undefined))
      return renewal
    },
    refused(token) {
      if (minted?.token === token) {
        previous = token
        minted = undefined
      }
    },
    forget() {
      previous = minted?.token ?? previous
      minted = undefined
    },
    owner() {
      owner ??= send({ method: 'GET', path: installationPath, authorization: jwt() })
        .then(({ statusCode, text }) => {
          const body = statusCode === 200 ? parseJson(text) : undefined
          if (Installation.Check(body)) return { login: body.account.login, allRepositories: body.repository_selection === 'all' }
          throw new UpstreamFailure(`GitHub App installation request answered ${statusCode}`, statusCode)
        })
        .catch((error: unknown) => {
          logger.warn({ err: error }, 'could not tell whose account the GitHub App is installed on; listing public repositories')
          owner = undefined
          return undefined
        })
      return owner
    },
    secrets: () => [minted?.token ?? '', previous, lastJwt].filter((secret) => secret !== ''),
    hasToken: () => minted !== undefined,
  }
}
