import fp from 'fastify-plugin'
import type { Dispatcher } from 'undici'
import type { ForgeAggregatorConfig } from '../config.ts'
import { RateLimitBudget } from '../upstream/budget.ts'
import { createForgeClient, type ForgeClient } from '../upstream/client.ts'
import type { AppCredentials, UpstreamCredentials } from '../upstream/credentials.ts'
import { createUpstreamMetrics } from '../upstream/metrics.ts'
import { createForgeService, type ForgeService } from './service.ts'

/** The forge as the app holds it. */
export interface Forge {
  /** What each endpoint asks the upstream for. */
  service: ForgeService
  /** The one client every call goes through: the service's. */
  client: ForgeClient
}

declare module 'fastify' {
  interface FastifyInstance {
    forge: Forge
  }
}

export interface ForgePluginOptions {
  config: Pick<
    ForgeAggregatorConfig,
    'FORGE_API_URL' | 'FORGE_TIMEOUT_MS' | 'FORGE_FOLLOWERS_LIMIT' | 'FORGE_MAX_REPO_PAGES' | 'FORGE_BUDGET_RESERVE'
  >
  /** How the upstream is called: anonymously, with a token, or as a GitHub App installation. */
  credentials: UpstreamCredentials
  /** Bytes of upstream projections held for revalidation (`cacheMemory`). */
  revalidationMaxBytes: number
  /** How long a held projection the replicas share outlives its last use (`cacheMemory`). */
  heldForMs: number
  /** The wall clock in ms: rate-limit resets are epoch seconds. */
  now: () => number
  /** The dispatcher the client builds on; a keep-alive Agent when absent. */
  dispatcher?: Dispatcher | undefined
}

/**
 * The forge: the upstream's metrics, the rate-limit budget (shared through `app.sharedCache` when
 * there is one), the one client that calls the upstream and the service that knows what to ask.
 * Decorates `app.forge`; closes the client's connections with the app.
 */
export const forge = fp<ForgePluginOptions>(
  async (app, { config, credentials, revalidationMaxBytes, heldForMs, now, dispatcher }) => {
    const metrics = createUpstreamMetrics(app.metrics, config.FORGE_BUDGET_RESERVE)
    const store = app.sharedCache?.store
    const budget = new RateLimitBudget({ reserve: config.FORGE_BUDGET_RESERVE, now, store, onChange: metrics.observeBudget })
    const defaultInstallation = installationOf(credentials)
    const client = createForgeClient({
      baseUrl: config.FORGE_API_URL,
      token: credentials.kind === 'token' ? credentials.token : undefined,
      app: defaultInstallation,
      publicApp: credentials.kind === 'public-app' ? { appId: credentials.appId, privateKey: credentials.privateKey, reserve: config.FORGE_BUDGET_RESERVE } : undefined,
      timeoutMs: config.FORGE_TIMEOUT_MS,
      userAgent: 'forge-aggregator/1.0',
      revalidationMaxBytes,
      heldForMs,
      budget,
      store,
      metrics,
      now,
      logger: app.log,
      ...(dispatcher ? { dispatcher } : {}),
    })
    const service = createForgeService({
      client,
      followersLimit: config.FORGE_FOLLOWERS_LIMIT,
      maxRepoPages: config.FORGE_MAX_REPO_PAGES,
      authentication: credentials.kind === 'token' ? 'token' : defaultInstallation ? 'app' : 'anonymous',
      publicApp: credentials.kind === 'public-app',
    })
    app.decorate('forge', { service, client })
    app.addHook('onClose', () => client.close())
    const githubApp =
      credentials.kind === 'app' || credentials.kind === 'public-app'
        ? { githubApp: { id: credentials.appId, installation: defaultInstallation?.installationId, public: credentials.kind === 'public-app' } }
        : {}
    app.log.info({ upstream: config.FORGE_API_URL, authenticated: credentials.kind !== 'anonymous', ...githubApp, budgetReserve: config.FORGE_BUDGET_RESERVE }, 'forge upstream')
  },
  { name: 'forge', fastify: '5.x', dependencies: ['shared-cache'] },
)

/** The one installation the client calls with by default: the App's, or a public App's default when it has one. */
function installationOf(credentials: UpstreamCredentials): AppCredentials | undefined {
  if (credentials.kind === 'app') return credentials
  if (credentials.kind !== 'public-app' || credentials.defaultInstallationId === undefined) return undefined
  return { appId: credentials.appId, installationId: credentials.defaultInstallationId, privateKey: credentials.privateKey }
}
