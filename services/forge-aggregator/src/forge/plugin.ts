import fp from 'fastify-plugin'
import { Agent, type Dispatcher } from 'undici'
import type { ForgeAggregatorConfig } from '../config.ts'
import { createAppRequests } from '../credentials/app-calls.ts'
import { createCredentials, type Credentials } from '../credentials/credentials.ts'
import type { UpstreamCredentials } from '../credentials/settings.ts'
import { RateLimitBudget } from '../upstream/budget.ts'
import { createForgeClient, type ForgeClient } from '../upstream/client.ts'
import { upstreamOf } from '../upstream/endpoint.ts'
import { createUpstreamMetrics } from '../upstream/metrics.ts'
import { createForgeService, type ForgeService } from './service.ts'

/**
 * The forge plugin: builds, from the configuration, what the routes ask the upstream through
 * (the credentials, the client, the service) and decorates the app with it.
 */

/** The forge as the app holds it. */
export interface Forge {
  /** What each endpoint asks the upstream for. */
  service: ForgeService
  /** The one client every call about an answer goes through: the service's. */
  client: ForgeClient
  /** Which credential each call goes with; what the webhooks change of them. */
  credentials: Credentials
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

const MAX_BODY_BYTES = 32 * 1024 * 1024

/**
 * The forge: the upstream's metrics, the default rate-limit budget (shared through
 * `app.sharedCache` when there is one), the credentials, the one client that calls the upstream
 * and the service that knows what to ask. Decorates `app.forge`; closes the upstream connections
 * with the app (those of a dispatcher it was given stay open: the giver's to close).
 */
export const forge = fp<ForgePluginOptions>(
  async (app, { config, credentials: configured, revalidationMaxBytes, heldForMs, now, dispatcher }) => {
    const metrics = createUpstreamMetrics(app.metrics, config.FORGE_BUDGET_RESERVE)
    const store = app.sharedCache?.store
    const agent = dispatcher ?? new Agent({ keepAliveTimeout: 30_000, maxResponseSize: MAX_BODY_BYTES })
    const upstream = upstreamOf(config.FORGE_API_URL, 'forge-aggregator/1.0')
    const credentials = createCredentials({
      configured,
      budget: new RateLimitBudget({ reserve: config.FORGE_BUDGET_RESERVE, now, store, onChange: metrics.observeBudget }),
      reserve: config.FORGE_BUDGET_RESERVE,
      // The App's own calls go straight to the upstream: they spend the App's limit, not an installation's.
      send: createAppRequests(upstream, agent, config.FORGE_TIMEOUT_MS),
      store,
      now,
      logger: app.log,
      metrics,
    })
    const client = createForgeClient({ upstream, credentials, timeoutMs: config.FORGE_TIMEOUT_MS, revalidationMaxBytes, heldForMs, store, metrics, now, logger: app.log, dispatcher: agent })
    const hasDefaultInstallation = configured.kind === 'app' || (configured.kind === 'public-app' && configured.defaultInstallationId !== undefined)
    const service = createForgeService({
      client,
      credentials,
      followersLimit: config.FORGE_FOLLOWERS_LIMIT,
      maxRepoPages: config.FORGE_MAX_REPO_PAGES,
      authentication: configured.kind === 'token' ? 'token' : hasDefaultInstallation ? 'app' : 'anonymous',
      publicApp: configured.kind === 'public-app',
    })
    app.decorate('forge', { service, client, credentials })
    app.addHook('onClose', async () => {
      if (!dispatcher) await agent.close()
    })
    const defaultInstallation = configured.kind === 'app' ? configured.installationId : configured.kind === 'public-app' ? configured.defaultInstallationId : undefined
    const githubApp =
      configured.kind === 'app' || configured.kind === 'public-app' ? { githubApp: { id: configured.appId, installation: defaultInstallation, public: configured.kind === 'public-app' } } : {}
    app.log.info({ upstream: config.FORGE_API_URL, authenticated: configured.kind !== 'anonymous', ...githubApp, budgetReserve: config.FORGE_BUDGET_RESERVE }, 'forge upstream')
  },
  { name: 'forge', fastify: '5.x', dependencies: ['shared-cache'] },
)
