import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { Registry } from 'prom-client'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { frameworkErrorHandler, registerErrorHandling } from '@repo/http-errors'
import { AccessLog, registerHttpSetup, serverOptions } from '@repo/service-kit'
import type { ForgeAggregatorConfig } from './config.ts'
import type { ForgeClient } from './forge-client.ts'
import { createForgeService } from './forge-service.ts'
import { createCacheResultCounter } from './metrics.ts'
import { ResponseCache } from './response-cache.ts'
import type { SharedStore } from './shared-store.ts'
import { healthRoutes } from './routes/health.ts'
import { repoRoutes } from './routes/repos.ts'
import { userRoutes } from './routes/users.ts'

export type AppConfig = Pick<
  ForgeAggregatorConfig,
  | 'CORS_ORIGINS'
  | 'FORGE_DEFAULT_USER'
  | 'FORGE_TOKEN'
  | 'FORGE_CACHE_TTL_SECONDS'
  | 'FORGE_CACHE_MAX_MB'
  | 'FORGE_FOLLOWERS_LIMIT'
  | 'FORGE_MAX_REPO_PAGES'
  | 'FORGE_TIMEOUT_MS'
  | 'FORGE_STALE_SECONDS'
  | 'TRUST_PROXY'
> &
  Partial<Pick<ForgeAggregatorConfig, 'RATE_LIMIT_PER_MINUTE'>>

export interface AppDependencies {
  client: ForgeClient
  /** The process logger (`server.ts` creates it). */
  logger: FastifyBaseLogger
  /** Where replicas share answers and production locks (`REDIS_URL`); absent, all stays in this process. */
  shared?: SharedStore | undefined
  /** The response cache's wall clock (ms); tests bring their own. */
  now?: () => number
  /**
   * The registry `/metrics` serves, the aggregator's own metrics included (DESIGN §8); a new one
   * when omitted, never prom-client's global one (tests build several apps in one process).
   */
  metrics?: Registry
}

/** The caches share FORGE_CACHE_MAX_MB: assembled answers are small, upstream bodies are not. */
export const RESPONSE_CACHE_SHARE = 0.25

const errorBody = (error: string) => ({ error })

/** Builds the forge-aggregator application around `client`. Never listens: `server.ts` does. */
export async function buildApp(config: AppConfig, deps: AppDependencies): Promise<FastifyInstance> {
  const metrics = deps.metrics ?? new Registry()
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new AccessLog(),
    ...serverOptions(config),
    // "?user_name=a&user_name=b" is an array, and an array is not a login.
    ajv: { customOptions: { coerceTypes: false } },
    frameworkErrors: frameworkErrorHandler({ errorBody }),
  }).withTypeProvider<TypeBoxTypeProvider>()

  registerErrorHandling(app, {
    errorBody,
    internalErrorBody: { error: 'Internal server error', details: 'Unexpected error; the server log has the cause' },
  })

  await registerHttpSetup(app, {
    openapi: {
      title: 'forge-aggregator',
      version: '1.0.0',
      description: "One code-hosting user's profile, repositories, followers and issue/PR counts in one answer.",
    },
    errorBody,
    corsOrigins: config.CORS_ORIGINS,
    corsMethods: ['GET', 'HEAD'],
    metrics,
    rateLimitPerMinute: config.RATE_LIMIT_PER_MINUTE,
    // With REDIS_URL the replicas count each client together; in the process otherwise.
    redis: deps.shared?.rateLimitRedis,
  })

  const service = createForgeService({
    client: deps.client,
    followersLimit: config.FORGE_FOLLOWERS_LIMIT,
    maxRepoPages: config.FORGE_MAX_REPO_PAGES,
    hasToken: config.FORGE_TOKEN !== undefined,
  })
  const cache = new ResponseCache({
    ttlSeconds: config.FORGE_CACHE_TTL_SECONDS,
    staleSeconds: config.FORGE_STALE_SECONDS,
    maxBytes: config.FORGE_CACHE_MAX_MB * 1024 * 1024 * RESPONSE_CACHE_SHARE,
    now: deps.now ?? Date.now,
    budget: deps.client.budget,
    shared: deps.shared,
    waitMs: config.FORGE_TIMEOUT_MS,
    onResult: createCacheResultCounter(metrics),
  })
  const routeOptions = { service, cache, defaultUser: config.FORGE_DEFAULT_USER }
  await app.register(healthRoutes)
  await app.register(userRoutes, routeOptions)
  await app.register(repoRoutes, routeOptions)

  return app
}
