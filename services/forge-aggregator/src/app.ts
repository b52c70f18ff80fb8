import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Dispatcher } from 'undici'
import { createServer, serviceKit } from '@repo/service-kit'
import type { ForgeAggregatorConfig } from './config.ts'
import { sharedCache } from './shared-cache/plugin.ts'
import { callerOf, credentialsFrom } from './credentials/settings.ts'
import { forge } from './forge/plugin.ts'
import { cacheMemory } from './cache/memory.ts'
import { responseCache } from './cache/response-cache-plugin.ts'
import { healthRoutes } from './http/health.ts'
import { repoRoutes } from './http/repos.ts'
import { userRoutes } from './http/users.ts'
import { webhookRoutes } from './http/webhooks.ts'
import { webhookSecretFrom } from './webhooks/secret.ts'

export interface AppOptions {
  /** The process logger (`createLogger`). */
  logger: FastifyBaseLogger
  /** The wall clock (ms) of the caches and the rate-limit budget; `Date.now` unless a test brings its own. */
  clock?: { now(): number }
  /** The undici dispatcher the upstream client builds on; a keep-alive Agent unless a test brings its own. */
  dispatcher?: Dispatcher
}

const errorBody = (error: string) => ({ error })

/**
 * The whole forge-aggregator from its configuration. It registers, in this order: `sharedCache`
 * (the Redis connection, the shared store and the production lock, with `REDIS_URL` or
 * `REDIS_SENTINELS`), `serviceKit` (the server span when tracing runs, request ids, security
 * headers, the Host check, CORS, the rate limit counting in that Redis, the error shape, JSON
 * bodies, OpenAPI, `/metrics`, the drain), `forge` (budget, client, service), `responseCache`
 * (`reply.sendAnswer`), then the routes: health, users, repos, and the webhooks when
 * `FORGE_WEBHOOK_SECRET` is set. Every dependency is opened by its plugin and closed with the
 * app. Never listens: `server.ts` does. Throws `ConfigError` when the upstream credentials do not
 * hold together (docs/design.md, "GitHub App"), before anything is opened.
 */
export async function buildApp(config: Readonly<ForgeAggregatorConfig>, options: AppOptions): Promise<FastifyInstance> {
  // The App's key is read and checked before anything opens: a bad one stops the start (ConfigError).
  const credentials = credentialsFrom(config)
  const webhookSecret = webhookSecretFrom(config)
  const now = options.clock ? () => options.clock!.now() : Date.now
  const memory = cacheMemory(config)
  const app = createServer({ logger: options.logger, errorBody, trustProxy: config.TRUST_PROXY })

  await app.register(sharedCache, { config, caller: callerOf(credentials) })
  await app.register(serviceKit, {
    openapi: {
      title: 'forge-aggregator',
      version: '1.0.0',
      description: "One code-hosting user's profile, repositories, followers and issue/PR counts in one answer.",
    },
    errors: {
      errorBody,
      internalErrorBody: { error: 'Internal server error', details: 'Unexpected error; the server log has the cause' },
    },
    cors: { origins: config.CORS_ORIGINS, methods: ['GET', 'HEAD'], exposedHeaders: ['ETag', 'X-Forge-Partial', 'Cache-Status', 'Age'] },
    // With a shared Redis the replicas count each client together; in the process otherwise.
    rateLimit: { perMinute: config.RATE_LIMIT_PER_MINUTE, redis: app.sharedCache?.connection.client },
  })
  await app.register(forge, { config, credentials, revalidationMaxBytes: memory.revalidationMaxBytes, heldForMs: memory.heldForMs, now, dispatcher: options.dispatcher })
  await app.register(responseCache, { config, answerBytes: memory.answerBytes, now })

  await app.register(healthRoutes)
  await app.register(userRoutes, { defaultUser: config.FORGE_DEFAULT_USER })
  await app.register(repoRoutes, { defaultUser: config.FORGE_DEFAULT_USER })
  // Without a secret there is no route: the path answers 404 like any unknown one.
  if (webhookSecret !== undefined) await app.register(webhookRoutes, {
      secret: webhookSecret,
      installationId: config.FORGE_APP_INSTALLATION_ID,
      publicApp: credentials.kind === 'public-app',
    })
  return app
}
