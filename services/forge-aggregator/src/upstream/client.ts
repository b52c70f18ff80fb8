import { performance } from 'node:perf_hooks'
import { Agent, type Dispatcher } from 'undici'
import { LRUCache } from 'lru-cache'
import type { TSchema } from '@sinclair/typebox'
import type { TypeCheck } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { parseJson } from '../parse-json.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import { storedEntries, type HeldBody } from '../shared-cache/stored.ts'
import { resourceOfPath, type RateLimitBudget } from './budget.ts'
import type { AppCredentials, PublicAppCredentials } from './credentials.ts'
import { BudgetSpent, InstallationUnavailable, statusFailure, transportFailure, UpstreamFailure, type Redact } from './errors.ts'
import { createInstallationTokens, type AppRequest, type InstallationAccount, type InstallationTokens } from './installation-token.ts'
import { createAccountInstallations, createInstallationPool, type AccountChange, type AccountInstallations, type InstallationPool } from './installations.ts'
import { upstreamInterceptors } from './interceptors.ts'
import type { CredentialKind, UpstreamMetrics } from './metrics.ts'
import { projectionOf } from './projection.ts'
import type { RequestContext } from './request-context.ts'

/** The REST API version every request pins (spec: "pinned to 2022-11-28"). */
const API_VERSION = '2022-11-28'

export interface ForgeClientOptions {
  /** The REST API root: `https://api.github.com`, or a GitHub Enterprise `https://host/api/v3`. */
  baseUrl: string
  /** A personal token, sent as it is with every call. */
  token?: string | undefined
  /**
   * A GitHub App installation: every call carries its installation token (docs/design.md, "GitHub
   * App"); with `publicApp`, the calls of accounts without an installation of their own. Excludes `token`.
   */
  app?: AppCredentials | undefined
  /**
   * A public GitHub App (docs/github-app.md, "A public App"): a call about an account that
   * installed it (`RequestContext.account`) carries that installation's token and spends its
   * budget; `reserve` is the share of each installation's core limit kept for users never seen.
   */
  publicApp?: (Pick<PublicAppCredentials, 'appId' | 'privateKey'> & { reserve: number }) | undefined
  /** Deadline of one call, retries and body included. */
  timeoutMs: number
  userAgent: string
  /** Bytes of held projections kept in this process for revalidation with `If-None-Match`; 0 keeps none. */
  revalidationMaxBytes: number
  /** How long a held projection in `store` outlives its last use: a 200 that brought it or a 304 that reused it. */
  heldForMs: number
  /** Where lines about calls go when the caller brings no request of its own. */
  logger: FastifyBaseLogger
  /** The rate-limit budget every answer feeds and every call is checked against. */
  budget: RateLimitBudget
  /** Where replicas share the held projections; absent, each process holds its own. */
  store?: SharedStore | undefined
  /** The app's wall clock in ms (rate-limit resets are epoch seconds). */
  now: () => number
  /** Where every call is counted and timed. */
  metrics?: UpstreamMetrics | undefined
  /** The dispatcher to build on; a keep-alive `Agent` unless a test brings its own. */
  dispatcher?: Dispatcher
}

/** The one way this service speaks to the upstream. */
export interface ForgeClient {
  /**
   * GETs `path` (build it with `upstreamPath`) and resolves to its JSON body once it passes
   * `body`, projected on the fields `body` names (`projectionOf`), whether it came whole or from
   * what a 304 revalidated. Throws `UpstreamNotFound`, `UpstreamRateLimited` (`BudgetSpent` when
   * the budget refused the call) or `UpstreamFailure` (a body that fails its check included);
   * never anything else.
   */
  get<Schema extends TSchema>(path: string, body: TypeCheck<Schema>, query?: Record<string, string | number>, request?: RequestContext): Promise<Schema['static']>
  /** With a GitHub App: the installation's account (asked once with the App's JWT); undefined without an App or when it cannot be told. */
  installationAccount(): Promise<InstallationAccount | undefined>
  /** With a GitHub App: forgets the installation token, so the next call mints a new one (docs/webhooks.md); nothing otherwise. */
  forgetInstallationToken(): void
  /**
   * With a public App, what an `installation` webhook said, in this process: accounts' new
   * installations (or none), and the installations whose tokens go. Nothing otherwise.
   */
  installationsChanged(changes: { accounts: readonly AccountChange[]; forget: readonly string[] }): void
  /** With a public App, the accounts' new installations written for every replica (Redis); rejects when they could not be. */
  recordInstallations(accounts: readonly AccountChange[]): Promise<void>
  /** Closes the upstream connections (of the Agent it made; a dispatcher given to it stays open). */
  close(): Promise<void>
}

/**
 * An upstream path in which every interpolated value is percent-encoded as exactly one path
 * segment, so that no input can change which resource is asked for.
 */
export function upstreamPath(strings: TemplateStringsArray, ...segments: string[]): string {
  return String.raw({ raw: strings }, ...segments.map(encodeSegment))
}

function encodeSegment(segment: string): string {
  if (segment === '' || segment === '.' || segment === '..') {
    throw new TypeError(`"${segment}" cannot be an upstream path segment`)
  }
  return encodeURIComponent(segment)
}

const MAX_BODY_BYTES = 32 * 1024 * 1024

/**
 * A `ForgeClient` on one keep-alive undici dispatcher composed of undici's own interceptors and
 * the budget's (`upstreamInterceptors`).
 *
 * Revalidation is one hand-written layer: the ETag of every upstream URL is held with the
 * projection of its last body, the fields the caller's check names (bounded; shared by the
 * replicas when a shared store is given), and every request for a held URL carries
 * `If-None-Match`; a 304 reuses the projection. undici's `cache` interceptor does
 * not fit, for two reasons found in its code: a 304 that carries `Cache-Control` (GitHub's
 * always do: `private, max-age=60`) deletes the stored entry instead of refreshing it, so the
 * next call goes out without `If-None-Match` and pays for a full 200; and the caller of a
 * revalidated answer gets the stored response's headers, not the 304's, so the 304's
 * `X-RateLimit-*` (the freshest word on the budget) would never reach us. When to ask again is
 * `FORGE_CACHE_TTL_SECONDS`'s decision, made by the response cache, not the upstream's `max-age`.
 */
export function createForgeClient(options: ForgeClientOptions): ForgeClient {
  const { token } = options
  const upstream = upstreamOf(options)
  const agent = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, maxResponseSize: MAX_BODY_BYTES })
  const sendAsApp = appRequests(options, agent, upstream)
  const tokens = options.app ? createInstallationTokens({ app: options.app, now: options.now, logger: options.logger, send: sendAsApp }) : undefined
  const fallback: Credential = { kind: token !== undefined ? 'token' : tokens ? 'app-default' : 'anonymous', budget: options.budget, tokens, token }
  const accounts = options.publicApp ? publicAppAccounts(options, options.publicApp, sendAsApp, fallback) : undefined
  options.metrics?.countHeldTokens(() => (tokens?.held() ? 1 : 0) + (accounts?.pool.held() ?? 0))
  const caller: Caller = {
    options,
    upstream,
    dispatcher: agent.compose(upstreamInterceptors(options.budget, options.now)),
    held: heldBodies(options.revalidationMaxBytes, options.store, options.heldForMs),
    // Every credential this process holds: the upstream may echo one in what a failure repeats.
    redact: (message) =>
      [token ?? '', ...(tokens?.secrets() ?? []), ...(accounts?.pool.secrets() ?? [])].reduce((said, secret) => (secret ? said.replaceAll(secret, '[redacted]') : said), message),
  }

  return {
    async get(path, check, query, request = { log: options.logger, revalidates: false }) {
      const target = query ? `${upstream.basePath}${path}?${new URLSearchParams(stringValues(query)).toString()}` : `${upstream.basePath}${path}`
      const withCredential = (credential: Credential) => {
        const call = (bearer: string | undefined) => callUpstream(caller, credential, target, check, request, bearer)
        return credential.tokens ? withInstallationToken(credential.tokens, call, request.log, target) : call(credential.token)
      }
      if (!accounts || request.account === undefined) return withCredential(fallback)
      const credential = await accounts.credentialOf(request.account, request.log)
      const { installation } = credential
      if (installation === undefined) return withCredential(credential)
      try {
        return await withCredential(credential)
      } catch (error) {
        // Uninstalled or suspended without a webhook saying so: the account has no installation now.
        if (!(error instanceof InstallationUnavailable)) throw error
        accounts.gone(request.account, installation, request.log)
        return withCredential(fallback)
      }
    },
    installationAccount: async () => tokens?.account(),
    forgetInstallationToken: () => tokens?.forget(),
    installationsChanged({ accounts: changes, forget }) {
      accounts?.directory.changed(changes)
      for (const id of forget) accounts?.pool.forget(id)
    },
    recordInstallations: async (changes) => accounts?.directory.record(changes),
    async close() {
      // A dispatcher the caller brought is the caller's to close.
      if (!options.dispatcher) await agent.close()
    },
  }
}

/** Where every call goes, and the headers it always carries. */
interface Upstream {
  origin: string
  /** The API root's path (`/api/v3` on GitHub Enterprise), without a trailing slash. */
  basePath: string
  /** The headers of every request, the REST API version pinned. */
  pinned: Record<string, string>
}

function upstreamOf(options: ForgeClientOptions): Upstream {
  const base = new URL(options.baseUrl)
  return {
    origin: base.origin,
    basePath: base.pathname.replace(/\/+$/, ''),
    pinned: { accept: 'application/vnd.github+json', 'x-github-api-version': API_VERSION, 'user-agent': options.userAgent },
  }
}

/** The App's own calls (its JWT) go straight to the upstream: they spend the App's limit, not an installation's. */
function appRequests(options: ForgeClientOptions, agent: Dispatcher, { origin, basePath, pinned }: Upstream): AppRequest {
  return async ({ method, path, authorization }) => {
    const signal = AbortSignal.timeout(options.timeoutMs)
    try {
      const response = await agent.request({ origin, path: `${basePath}${path}`, method, headers: { ...pinned, authorization }, signal })
      return { statusCode: response.statusCode, text: await response.body.text() }
    } catch (error) {
      // An upstream that cannot be reached fails a mint as it fails a call (500 with what
      // happened), not as a fault of ours. A transport error's code quotes no credential.
      throw transportFailure(error, signal.aborted, options.timeoutMs, (message) => message)
    }
  }
}

/** Whom one call spends and how it authenticates: a token sent as it is, an installation's tokens, or nothing. */
interface Credential {
  kind: CredentialKind
  /** A public App's installation of the account the call is about. */
  installation?: string | undefined
  budget: RateLimitBudget
  tokens?: InstallationTokens | undefined
  token?: string | undefined
}

/** A public App's accounts: which installation each has, and the tokens and budgets of those held. */
interface PublicAppAccounts {
  directory: AccountInstallations
  pool: InstallationPool
  /** The credential of calls about `login`: its own installation's, else `fallback` (the default installation, or none). */
  credentialOf(login: string, log: FastifyBaseLogger): Promise<Credential>
  /** GitHub would not mint for `login`'s installation `id`: it is remembered as none, and its token forgotten. */
  gone(login: string, id: string, log: FastifyBaseLogger): void
}

function publicAppAccounts(options: ForgeClientOptions, app: NonNullable<ForgeClientOptions['publicApp']>, send: AppRequest, fallback: Credential): PublicAppAccounts {
  const { appId, privateKey, reserve } = app
  const { now, store, logger } = options
  const directory = createAccountInstallations({ appId, privateKey, send, store, now, onLookup: options.metrics?.observeLookup })
  const pool = createInstallationPool({ appId, privateKey, send, now, logger, store, reserve })
  const defaultInstallation = options.app?.installationId
  return {
    directory,
    pool,
    async credentialOf(login, log) {
      const id = await directory.of(login, log)
      if (id === undefined || id === defaultInstallation) return fallback
      return { kind: 'app-account', installation: id, budget: pool.budgetOf(id), tokens: pool.tokensOf(id) }
    },
    gone(login, id, log) {
      log.info({ githubApp: { installation: id } }, "GitHub App installation gone or suspended; the account's calls go with the default credential")
      const changes = [{ login, installation: null }]
      directory.changed(changes)
      pool.forget(id)
      // Best effort: without Redis, the next replica to find out does the same.
      directory.record(changes).catch(() => undefined)
    },
  }
}

/** `call` with the installation's token. A refused one (revoked, or expired early) is renewed once, for one more try: a second 401 is the answer. */
async function withInstallationToken<Body>(tokens: InstallationTokens, call: (bearer: string) => Promise<Body>, log: FastifyBaseLogger, target: string): Promise<Body> {
  const installationToken = await tokens.current()
  try {
    return await call(installationToken)
  } catch (error) {
    if (!(error instanceof UpstreamFailure && error.status === 401)) throw error
    log.info({ upstream: { path: target } }, 'installation token refused; renewing it once')
    tokens.refused(installationToken)
    return call(await tokens.current())
  }
}

/** What every call of one client goes through. */
interface Caller {
  options: ForgeClientOptions
  upstream: Upstream
  /** The agent under the interceptors (`upstreamInterceptors`). */
  dispatcher: Dispatcher
  held: HeldBodies
  redact: Redact
}

/** One upstream call: `target` asked with `bearer`, spending `credential`'s budget, revalidated when a readable projection is held; its body once it passes `check`, projected. */
async function callUpstream<Schema extends TSchema>(
  caller: Caller,
  credential: Credential,
  target: string,
  check: TypeCheck<Schema>,
  request: RequestContext,
  bearer: string | undefined,
): Promise<Schema['static']> {
  const { options, upstream, held } = caller
  const headers = bearer ? { ...upstream.pinned, authorization: `Bearer ${bearer}` } : upstream.pinned
  // What other replicas learned of the budget counts before this call is made.
  const [heldEntry] = await Promise.all([held.get(target), credential.budget.refresh()])
  const reusable = heldEntry && readHeld(heldEntry, check)
  const { response, text } = await send(caller, credential, target, reusable ? { ...headers, 'if-none-match': reusable.entry.etag } : headers, request)
  const { statusCode } = response
  if (statusCode === 304 && reusable) {
    // Held again: its life runs from this use, so that the next revalidation finds it too.
    held.hold(target, reusable.entry)
    return reusable.body
  }
  if (statusCode === 200) {
    const projection = projectionOf(check)
    const body = projection.project(checked(check, text))
    const etag = response.headers.etag
    if (typeof etag === 'string') held.hold(target, { etag, shape: projection.shape, text: JSON.stringify(body) })
    return body
  }
  throw statusFailure(statusCode, response.headers, text, options.now(), caller.redact)
}

/** One GET of `target` through the interceptors, within the deadline: its answer and body (none for a 304), counted (by credential too), timed and logged. */
async function send(
  caller: Caller,
  credential: Credential,
  target: string,
  headers: Record<string, string>,
  request: RequestContext,
): Promise<{ response: Dispatcher.ResponseData; text: string }> {
  const { options, upstream, dispatcher } = caller
  const resource = resourceOfPath(target.slice(upstream.basePath.length))
  const deadline = AbortSignal.timeout(options.timeoutMs)
  const started = performance.now()
  let response: Dispatcher.ResponseData
  let text = ''
  try {
    response = await dispatcher.request({
      origin: upstream.origin,
      path: target,
      method: 'GET',
      headers,
      signal: deadline,
      rateLimitResource: resource,
      requestContext: request,
      rateLimitBudget: credential.budget,
    })
    if (response.statusCode === 304) await response.body.dump()
    else text = await response.body.text()
  } catch (error) {
    if (error instanceof BudgetSpent) {
      // GitHub: keep calling after a rate limit and the integration may be banned.
      request.log.debug({ upstream: { path: target } }, 'upstream rate limit spent; call not made')
      options.metrics?.observeCredential(credential.kind, 'budget_spent')
      throw error
    }
    options.metrics?.observeCall(resource, 'error', (performance.now() - started) / 1000)
    throw transportFailure(error, deadline.aborted, options.timeoutMs, caller.redact)
  }
  const ms = performance.now() - started
  options.metrics?.observeCall(resource, response.statusCode, ms / 1000)
  options.metrics?.observeCredential(credential.kind, 'sent')
  request.log.debug({ upstream: { path: target, statusCode: response.statusCode, ms: Math.round(ms) } }, 'upstream call')
  return { response, text }
}

/**
 * A held entry as `check`'s caller may reuse it, or undefined when it cannot be read as one: then
 * the call goes out without `If-None-Match`, and its 200 replaces the entry. An entry projected
 * for another schema (another version of the service) cannot be read: it may lack a field this
 * schema reads. One without a shape is a whole body (written before projections were held), from
 * which this projection is made; it is held as one from its first 304 on.
 */
function readHeld<Schema extends TSchema>(entry: HeldBody, check: TypeCheck<Schema>): { entry: HeldBody; body: Schema['static'] } | undefined {
  const projection = projectionOf(check)
  if (entry.shape !== undefined && entry.shape !== projection.shape) return undefined
  const parsed = parsedBody(check, entry.text)
  if (!('body' in parsed)) return undefined
  const body = projection.project(parsed.body)
  const text = entry.shape === undefined ? JSON.stringify(body) : entry.text
  return { entry: { etag: entry.etag, shape: projection.shape, text }, body }
}

/** The projection and ETag of every upstream URL's last body, for `If-None-Match`. */
interface HeldBodies {
  get(target: string): Promise<HeldBody | undefined>
  hold(target: string, body: HeldBody): void
}

/**
 * Held projections: the replicas' shared ones when a store is given (each for `heldForMs` after
 * its last use), else this process's own (at most `maxBytes`; with 0 none is read). An entry's
 * shape is not counted: it is one string per schema, shared by every entry made with it.
 */
function heldBodies(maxBytes: number, store: SharedStore | undefined, heldForMs: number): HeldBodies {
  const local = maxBytes > 0 ? new LRUCache<string, HeldBody>({ maxSize: maxBytes, sizeCalculation: (entry) => entry.text.length + entry.etag.length }) : undefined
  return {
    async get(target) {
      if (!local) return undefined
      return (await store?.get(storedEntries.held, `held:${target}`)) ?? local.get(target)
    },
    hold(target, body) {
      local?.set(target, body)
      void store?.set(`held:${target}`, JSON.stringify(body), heldForMs)
    },
  }
}

function stringValues(query: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)]))
}

/** The body as JSON that passes `check`: anything else is the upstream's fault, and says where it failed. */
function checked<Schema extends TSchema>(check: TypeCheck<Schema>, text: string): Schema['static'] {
  const parsed = parsedBody(check, text)
  if ('body' in parsed) return parsed.body
  throw new UpstreamFailure(parsed.failure)
}

/** `text` as JSON that passes `check`, or what is wrong with it. */
function parsedBody<Schema extends TSchema>(check: TypeCheck<Schema>, text: string): { body: Schema['static'] } | { failure: string } {
  const body = parseJson(text)
  if (body === undefined) return { failure: 'Upstream sent a body that is not valid JSON' }
  if (check.Check(body)) return { body }
  // A body that fails its check has at least one error.
  const { path, message } = check.Errors(body).First()!
  return { failure: `Upstream sent an unexpected body (${path || '/'}: ${message})` }
}
