import { randomUUID } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { RedisSubscriber } from '@repo/service-kit'
import type { ResponseCache } from '../cache/response-cache.ts'
import type { SharedCache } from '../shared-cache/plugin.ts'
import { parseJson } from '../parse-json.ts'
import type { Credentials } from '../credentials/credentials.ts'
import type { Drops } from './events.ts'

/**
 * How a verified delivery is applied once (docs/webhooks.md, "Repeats"): remembered, its drops
 * done here and, with a shared Redis, announced to every replica.
 */

/** GitHub lets a delivery be redelivered for 3 days: a repeat is recognised that long. */
export const DELIVERY_MEMORY_SECONDS = 3 * 24 * 60 * 60
/** Without a shared Redis: at most this many deliveries remembered (about 100 bytes each). */
const LOCAL_DELIVERIES = 50_000

/**
 * One verified delivery as it is remembered (docs/webhooks.md, "Repeats"): by its
 * `X-GitHub-Delivery` id and by the SHA-256 of its body. The signature covers the body only, so a
 * captured delivery sent again under a new id is a repeat all the same.
 */
export interface Delivery {
  id: string
  digest: string
}

/** The deliveries applied, and what applying one does. */
export interface Deliveries {
  /** Whether a delivery with this id or this body was applied already. Throws when it cannot tell. */
  isRepeat(delivery: Delivery): Promise<boolean>
  /**
   * Applies `drops` in this process and, with a shared Redis, in it and on every replica, and
   * remembers the delivery; resolves once done, with the ages (ms) of the fresh answers made
   * stale. Rejects when Redis could not do it: then the delivery is not remembered (a
   * redelivery applies it), though this process's drops are done.
   */
  apply(delivery: Delivery, drops: Drops): Promise<number[]>
}

export interface DeliveriesOptions {
  cache: ResponseCache
  /** What a delivery changes of the credentials: the default token forgotten, a public App's installations. */
  credentials: Pick<Credentials, 'forgetDefaultToken' | 'installationsChanged' | 'recordInstallations'>
  logger: FastifyBaseLogger
}

/**
 * One message on the drops channel: the keys, whether the default installation's token goes, and
 * the replica that sent it (it has done them). `installationToken` is that boolean's name on the
 * wire, which versions running beside this one read.
 */
const DropMessage = TypeCompiler.Compile(
  Type.Object({
    from: Type.String(),
    keys: Type.Array(Type.String()),
    installationToken: Type.Boolean(),
    // A public App's installation changes; versions before them ignore the field.
    installations: Type.Optional(
      Type.Object({
        accounts: Type.Array(Type.Object({ login: Type.String(), installation: Type.Union([Type.String(), Type.Null()]) })),
        forget: Type.Array(Type.String()),
      }),
    ),
  }),
)

// The delivery is remembered and the replicas told in one step: either both happen or neither.
// The channel is an argument, not a key: a channel is not a key, and Redis Cluster routes by KEYS.
const REMEMBER_AND_ANNOUNCE = `redis.call('set', KEYS[1], '1', 'EX', ARGV[1])
redis.call('set', KEYS[2], '1', 'EX', ARGV[1])
return redis.call('publish', ARGV[2], ARGV[3])`

/**
 * Deliveries across replicas (docs/webhooks.md): remembered in this process without a shared
 * Redis (`createLocalDeliveries`), in Redis and announced to every replica with one
 * (`createSharedDeliveries`).
 */
export function createDeliveries(options: DeliveriesOptions & { shared: SharedCache | undefined }): Deliveries {
  return options.shared ? createSharedDeliveries({ ...options, shared: options.shared }) : createLocalDeliveries(options)
}

/** Without a shared Redis: deliveries are remembered in this process (bounded) and drop its answers. */
export function createLocalDeliveries({ cache, credentials }: DeliveriesOptions): Deliveries {
  const seen = new LRUCache<string, true>({ max: LOCAL_DELIVERIES, ttl: DELIVERY_MEMORY_SECONDS * 1000 })
  return {
    isRepeat: async ({ id, digest }) => seen.has(`id:${id}`) || seen.has(`body:${digest}`),
    async apply({ id, digest }, drops) {
      seen.set(`id:${id}`, true).set(`body:${digest}`, true)
      const dropping = Promise.all(drops.keys.map((key) => cache.dropEverywhere(key)))
      if (drops.forgetsDefaultToken) credentials.forgetDefaultToken()
      if (drops.installations) credentials.installationsChanged(drops.installations)
      return (await dropping).filter((age) => age !== undefined)
    },
  }
}

/**
 * With a shared Redis (docs/design.md, "Webhook drops"): each answer a delivery drops is made
 * stale here and in Redis (`ResponseCache.dropEverywhere`: a replica that reads it, on a memory
 * miss, revalidates), then one script remembers the delivery and publishes its drops on the
 * `drops` channel, where every other replica makes its own copy stale (`listenForDrops`). A memory
 * hit costs nothing more: no replica asks Redis about drops.
 */
export function createSharedDeliveries(options: DeliveriesOptions & { shared: Pick<SharedCache, 'connection' | 'keyFor'> }): Deliveries {
  const { cache, credentials, shared } = options
  const { connection } = shared
  const channel = shared.keyFor('drops')
  const replica = randomUUID()
  const keysOf = ({ id, digest }: Delivery) => [shared.keyFor(`webhook-delivery:${id}`), shared.keyFor(`webhook-body:${digest}`)]
  listenForDrops(connection.duplicate(), { ...options, channel, replica })

  return {
    async isRepeat(delivery) {
      const known = await connection.run('EXISTS', (client) => client.exists(keysOf(delivery)))
      return known > 0
    },
    async apply(delivery, drops) {
      // Every answer is dropped in memory before the first command to Redis is sent.
      const dropping = Promise.all(drops.keys.map((key) => cache.dropEverywhere(key)))
      if (drops.forgetsDefaultToken) credentials.forgetDefaultToken()
      // An installation gone stops being used here at once, and on the others once Redis says so.
      const changes = drops.installations
      if (changes) credentials.installationsChanged(changes)
      const [ages] = await Promise.all([dropping, changes && credentials.recordInstallations(changes.accounts)])
      const message = JSON.stringify({ from: replica, keys: drops.keys, installationToken: drops.forgetsDefaultToken, installations: changes })
      await connection.run('EVAL', (client) =>
        client.eval(REMEMBER_AND_ANNOUNCE, { keys: keysOf(delivery), arguments: [String(DELIVERY_MEMORY_SECONDS), channel, message] }),
      )
      return ages.filter((age) => age !== undefined)
    },
  }
}

/**
 * Subscribes `subscriber` to `channel` and makes this process's answers stale as other replicas
 * announce their drops. A subscriber that lost its connection may have missed messages, so once it
 * is back every answer in memory is made stale; so is every answer on a message it cannot read.
 */
function listenForDrops(subscriber: RedisSubscriber, options: DeliveriesOptions & { channel: string; replica: string }): void {
  const { cache, credentials, logger, channel, replica } = options
  let lost = false
  subscriber.on('error', () => (lost = true))
  subscriber.on('ready', () => {
    if (!lost) return
    // node-redis subscribes again by itself; what was published meanwhile did not arrive.
    lost = false
    cache.dropAll()
    logger.info({ channel }, 'webhook drops may have been missed while reconnecting: every answer in memory revalidates')
  })
  subscriber
    .connect()
    .then(() => subscriber.subscribe(channel, heard))
    .then(
      () => logger.info({ channel }, 'listening for webhook drops'),
      (error: unknown) => logger.warn({ err: error, channel }, 'not listening for webhook drops: drops by other replicas reach this one through Redis only'),
    )

  function heard(text: string): void {
    const message = parseJson(text)
    if (!DropMessage.Check(message)) {
      cache.dropAll()
      logger.warn({ channel }, 'unreadable webhook drop message: every answer in memory revalidates')
      return
    }
    if (message.from === replica) return
    for (const key of message.keys) cache.drop(key)
    if (message.installationToken) credentials.forgetDefaultToken()
    if (message.installations) credentials.installationsChanged(message.installations)
    logger.debug({ keys: message.keys.length, forgetsDefaultToken: message.installationToken }, 'webhook drops heard from another replica')
  }
}
