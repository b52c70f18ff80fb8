import { Type, type Static } from '@sinclair/typebox'
import { redisAuthSettings, redisDeadlineSettings, sentinelSettings, serverSettings, tracingSettings } from '@repo/config'

/** Every environment variable items-list reads, with its default. */
export const ItemsListConfig = Type.Object({
  ...serverSettings({ port: 8080 }),
  ...tracingSettings(),
  REDIS_URL: Type.Optional(
    Type.String({
      pattern: '^rediss?://',
      description: 'redis:// or rediss:// URL (redis://user:password@host:port/db); when set it overrides REDIS_HOST, REDIS_PORT and REDIS_DB; logged without its password',
    }),
  ),
  REDIS_HOST: Type.String({ default: 'localhost', minLength: 1, description: 'Redis host' }),
  REDIS_PORT: Type.Integer({ default: 6379, minimum: 1, maximum: 65535, description: 'Redis port' }),
  ...redisAuthSettings(),
  ...redisDeadlineSettings(),
  REDIS_DB: Type.Integer({ default: 0, minimum: 0, description: 'Redis database number' }),
  ...sentinelSettings(),
  ITEMS_KEY: Type.String({
    default: 'items',
    minLength: 1,
    description: 'the Redis key of the list (its index; its chunks and records are under <key>:)',
  }),
  ITEMS_MAX_COUNT: Type.Integer({
    default: 1_000_000,
    minimum: 1,
    description: 'the most names the list may hold; an append past it answers 507',
  }),
  IDEMPOTENCY_TTL_SECONDS: Type.Integer({
    default: 86_400,
    minimum: 1,
    description: 'how long an Idempotency-Key is remembered after its append (at least 1)',
  }),
  ITEMS_MIN_REPLICAS_ACK: Type.Integer({
    default: 0,
    minimum: 0,
    description: 'replicas that must hold an append before it is answered 201 (Redis WAIT); 0: the primary alone',
  }),
  ITEMS_EVENTS_KEPT: Type.Integer({
    default: 100_000,
    minimum: 100,
    description: 'about how many changes the events stream keeps (MAXLEN ~, at least 100): a watcher that missed more starts again with a snapshot',
  }),
  ITEMS_EVENTS_BUFFER_BYTES: Type.Integer({
    default: 1_048_576,
    minimum: 1_024,
    description: 'bytes of events queued for one watcher past which the replica ends its stream (at least 1024); the client resumes from its last id',
  }),
  ITEMS_EVENTS_MAX_STREAMS: Type.Integer({
    default: 10_000,
    minimum: 1,
    description: 'event streams (GET /items/events) one replica keeps open; past it 503',
  }),
})

export type ItemsListConfig = Static<typeof ItemsListConfig>
