import { Type, type Static } from '@sinclair/typebox'
import { redisAuthSettings, sentinelSettings, serverSettings, tracingSettings } from '@repo/config'

/** A GitHub login: 1–39 letters, digits and hyphens. */
export const LOGIN_PATTERN = '^[A-Za-z0-9-]{1,39}$'

/** Every environment variable forge-aggregator reads, with its default. */
export const ForgeAggregatorConfig = Type.Object({
  ...serverSettings({ port: 3000 }),
  ...tracingSettings(),
  FORGE_API_URL: Type.String({
    default: 'https://api.github.com',
    pattern: '^https?://[^\\s]+$',
    description: 'upstream REST base URL (also a GitHub Enterprise /api/v3 URL)',
  }),
  FORGE_DEFAULT_USER: Type.String({
    default: 'octocat',
    pattern: LOGIN_PATTERN,
    description: 'user for users, owner for repos, when none is given',
  }),
  FORGE_TOKEN: Type.Optional(Type.String({ description: 'upstream access token; never logged or echoed' })),
  FORGE_APP_ID: Type.Optional(
    Type.String({ pattern: '^(?:[0-9]+|Iv[0-9A-Za-z.]+)$', description: "GitHub App: the App's id (or client id), the JWT's issuer; excludes FORGE_TOKEN" }),
  ),
  FORGE_APP_INSTALLATION_ID: Type.Optional(Type.String({ pattern: '^[0-9]+$', description: 'GitHub App: the installation whose token the service calls with' })),
  FORGE_APP_PRIVATE_KEY: Type.Optional(Type.String({ description: "GitHub App: the App's RSA private key (PEM); never logged" })),
  FORGE_APP_PRIVATE_KEY_FILE: Type.Optional(Type.String({ description: "GitHub App: path of the App's RSA private key (PEM), read at start-up" })),
  FORGE_TIMEOUT_MS: Type.Integer({ default: 10_000, minimum: 100, maximum: 120_000, description: 'deadline of one upstream call' }),
  FORGE_CACHE_TTL_SECONDS: Type.Integer({ default: 60, minimum: 0, maximum: 86_400, description: 'freshness of cached results; 0 never answers from the cache fresh' }),
  FORGE_CACHE_MAX_MB: Type.Integer({ default: 64, minimum: 1, maximum: 4_096, description: 'memory the caches may hold' }),
  FORGE_FOLLOWERS_LIMIT: Type.Integer({ default: 30, minimum: 1, maximum: 100, description: 'followers returned' }),
  FORGE_MAX_REPO_PAGES: Type.Integer({ default: 10, minimum: 1, maximum: 100, description: 'pages of 100 repositories read for statistics' }),
  FORGE_STALE_SECONDS: Type.Integer({
    default: 86_400,
    minimum: 0,
    maximum: 30 * 86_400,
    description: 'how long past its TTL an answer may still be sent when the upstream fails or the budget is spent; 0 never',
  }),
  FORGE_BUDGET_RESERVE: Type.Number({
    default: 0.1,
    minimum: 0,
    maximum: 1,
    description: 'share of the core rate limit kept for users never seen: below it, known users are answered stale until the reset',
  }),
  REDIS_URL: Type.Optional(
    Type.String({
      pattern: '^rediss?://[^\\s]+$',
      description: 'redis:// or rediss:// URL; set, replicas share answers, held bodies, the budget and production locks',
    }),
  ),
  ...redisAuthSettings(),
  ...sentinelSettings(),
})

export type ForgeAggregatorConfig = Static<typeof ForgeAggregatorConfig>
