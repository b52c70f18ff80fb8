import { Type, type Static } from '@sinclair/typebox'
import { redisAuthSettings, redisDeadlineSettings, sentinelSettings, serverSettings, tracingSettings } from '@repo/config'

/**
 * forge-aggregator's configuration: every environment variable it reads, with its default and
 * description (docs/configuration.md).
 */

/** A GitHub login: 1–39 letters, digits and hyphens. */
export const LOGIN_PATTERN = '^[A-Za-z0-9-]{1,39}$'

/** Every environment variable forge-aggregator reads, with its default. */
export const ForgeAggregatorConfig = Type.Object({
  ...serverSettings({ port: 3000 }),
  ...tracingSettings(),
  FORGE_API_URL: Type.String({
    default: 'https://api.github.com',
    pattern: '^https?://[^\\s]+$',
    description: 'upstream REST base URL; a GitHub Enterprise https://host/api/v3 works too',
  }),
  FORGE_DEFAULT_USER: Type.String({
    default: 'octocat',
    pattern: LOGIN_PATTERN,
    description: 'the user of users without user_name, and the owner for repos',
  }),
  FORGE_TOKEN: Type.Optional(
    Type.String({
      description:
        'upstream token, sent as Authorization: Bearer …: 5,000 calls/hour and private repositories; never logged or echoed. Excludes the FORGE_APP_* variables',
    }),
  ),
  FORGE_APP_ID: Type.Optional(
    Type.String({
      pattern: '^(?:[0-9]+|Iv[0-9A-Za-z.]+)$',
      description: "GitHub App: the App's id (or its client id, Iv…), the issuer of its JWT. With the installation id and a key, the service calls as the App's installation",
    }),
  ),
  FORGE_APP_INSTALLATION_ID: Type.Optional(
    Type.String({
      pattern: '^[0-9]+$',
      description: 'GitHub App: the installation whose token every call carries; with FORGE_APP_PUBLIC=true, optional: the default, for accounts without an installation and for repos',
    }),
  ),
  FORGE_APP_PUBLIC: Type.Boolean({
    default: false,
    description:
      "GitHub App: true serves every account that installed the App with that installation's own token and quota (docs/github-app.md); needs FORGE_APP_ID and a key",
  }),
  FORGE_APP_PRIVATE_KEY: Type.Optional(Type.String({ description: "GitHub App: the App's RSA private key (PEM; one line with \\n works too). Never logged" })),
  FORGE_APP_PRIVATE_KEY_FILE: Type.Optional(Type.String({ description: 'GitHub App: path of that key, read at start-up (instead of FORGE_APP_PRIVATE_KEY)' })),
  FORGE_WEBHOOK_SECRET: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        "the GitHub App's webhook secret: set, POST /api/forge/webhooks takes signed deliveries and drops what they change (docs/webhooks.md); unset, that path is 404. Never logged",
    }),
  ),
  FORGE_WEBHOOK_SECRET_FILE: Type.Optional(Type.String({ description: 'path of that secret, read at start-up (instead of FORGE_WEBHOOK_SECRET)' })),
  FORGE_TIMEOUT_MS: Type.Integer({ default: 10_000, minimum: 100, maximum: 120_000, description: 'deadline of one upstream call, retries included (100–120000)' }),
  FORGE_CACHE_TTL_SECONDS: Type.Integer({
    default: 60,
    minimum: 0,
    maximum: 86_400,
    description: 'freshness of cached answers; 0 never answers from the cache fresh (answers are still kept for stale-if-error) (0–86400)',
  }),
  FORGE_CACHE_MAX_MB: Type.Integer({ default: 64, minimum: 1, maximum: 4_096, description: 'memory the caches may hold (1–4096): about 51 accounts of 30 repositories per MB; a replica peaks at about 225 MB + 1.6 × this' }),
  FORGE_FOLLOWERS_LIMIT: Type.Integer({ default: 30, minimum: 1, maximum: 100, description: 'followers returned (1–100; still one upstream call)' }),
  FORGE_MAX_REPO_PAGES: Type.Integer({ default: 10, minimum: 1, maximum: 100, description: 'pages of 100 repositories read for statistics (1–100)' }),
  FORGE_STALE_SECONDS: Type.Integer({
    default: 86_400,
    minimum: 0,
    maximum: 30 * 86_400,
    description: 'how long past its TTL an answer may still be sent when the upstream fails or the budget is spent; 0 never (0–2592000, 30 days)',
  }),
  FORGE_BUDGET_RESERVE: Type.Number({
    default: 0.1,
    minimum: 0,
    maximum: 1,
    description: 'share of the core rate limit kept for users never seen: below it, known users are answered stale until the reset (0–1)',
  }),
  REDIS_URL: Type.Optional(
    Type.String({
      pattern: '^rediss?://[^\\s]+$',
      description:
        'redis:// or rediss:// URL. Unset: everything stays in the process (one replica). Set: answers, the ETags held with what is read of each upstream body, the rate-limit budget and the production locks are shared by every replica through it',
    }),
  ),
  ...redisAuthSettings(),
  ...redisDeadlineSettings(),
  ...sentinelSettings(),
})

export type ForgeAggregatorConfig = Static<typeof ForgeAggregatorConfig>
