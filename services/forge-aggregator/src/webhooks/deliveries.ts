import { randomUUID } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { RedisConnection, RedisSubscriber } from '@repo/service-kit'
import type { ResponseCache } from '../cache/response-cache.ts'
import { storedEntries } from '../shared-cache/stored.ts'
import type { Drops } from './events.ts'

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
  /** Forgets the installation token (`ForgeClient.forgetInstallationToken`). */
  forgetInstallationToken: () => void
  /** The shared cache's connection and namespace, when there is one. */
  shared: { connection: RedisConnection; namespace: string } | undefined
  now: () => number
  logger: FastifyBaseLogger
}

/** One message on the drops channel: the keys, the token, and the replica that sent it (it has done them). */
const DropMessage = TypeCompiler.Compile(Type.Object({ from: Type.String(), keys: Type.Array(Type.String()), installationToken: Type.Boolean() }))

/** node-redis's subscriber says when it is connected again; service-kit's type names only its errors. */
type Subscriber = RedisSubscriber & { on(event: 'ready', listener: () => void): unknown }

// The delivery is remembered and the replicas told in one step: either both happen or neither.
const REMEMBER_AND_ANNOUNCE = `redis.call('set', KEYS[1], '1', 'EX', ARGV[1])
redis.call('set', KEYS[2], '1', 'EX', ARGV[1])
return redis.call('publish', KEYS[3], ARGV[2])`

/**
 * Deliveries across replicas (docs/design.md, "Webhook drops"). Without a shared Redis, they are
 * remembered in this process (bounded) and drop its answers. With one: each answer a delivery
 * drops is written back to Redis stale (a replica that reads it, on a memory miss, revalidates),
 * then one script remembers the delivery and publishes its drops on `<namespace>drops`, where
 * every replica makes its own copy stale. A memory hit costs nothing more: no replica asks Redis
 * about drops. A replica whose subscriber lost its connection may have missed messages, so once
 * it is back it makes every answer in its memory stale.
 */
export function createDeliveries(options: DeliveriesOptions): Deliveries {
  const { cache, forgetInstallationToken, shared, now, logger } = options

  function dropHere(drops: Pick<Drops, 'keys' | 'installationToken'>): Map<string, number> {
    const ages = new Map<string, number>()
    for (const key of drops.keys) {
      const age = cache.drop(key)
      if (age !== undefined) ages.set(key, age)
    }
    if (drops.installationToken) forgetInstallationToken()
    return ages
  }

  if (!shared) {
    const seen = new LRUCache<string, true>({ max: LOCAL_DELIVERIES, ttl: DELIVERY_MEMORY_SECONDS * 1000 })
    return {
      isRepeat: async ({ id, digest }) => seen.has(`id:${id}`) || seen.has(`body:${digest}`),
      async apply({ id, digest }, drops) {
        seen.set(`id:${id}`, true).set(`body:${digest}`, true)
        return [...dropHere(drops).values()]
      },
    }
  }

  const { connection, namespace } = shared
  const channel = `${namespace}drops`
  const replica = randomUUID()
  const keysOf = ({ id, digest }: Delivery) => [`${namespace}webhook-delivery:${id}`, `${namespace}webhook-body:${digest}`]

  const subscriber = connection.duplicate() as Subscriber
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
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      message = undefined
    }
    if (!DropMessage.Check(message)) {
      cache.dropAll()
      logger.warn({ channel }, 'unreadable webhook drop message: every answer in memory revalidates')
      return
    }
    if (message.from === replica) return
    dropHere(message)
    logger.debug({ keys: message.keys.length, installationToken: message.installationToken }, 'webhook drops heard from another replica')
  }

  /** Writes the answer at `key` back stale, keeping its expiry; its age (ms) when it was fresh. */
  async function dropShared(key: string): Promise<number | undefined> {
    const at = `${namespace}answer:${key}`
    const text = await connection.run('GET', (client) => client.get(at))
    const answer = text === null ? undefined : storedEntries.answer.parse(text)
    const time = now()
    if (!answer || time > answer.freshUntil) return undefined
    const stale = JSON.stringify({ ...answer, freshUntil: time - 1 })
    await connection.run('SET', (client) => client.set(at, stale, { expiration: { type: 'PX', value: Math.max(1, Math.ceil(answer.keepUntil - time)) } }))
    return time - answer.producedAt
  }

  return {
    async isRepeat(delivery) {
      const known = await connection.run('EXISTS', (client) => client.exists(keysOf(delivery)))
      return known > 0
    },
    async apply(delivery, drops) {
      const ages = dropHere(drops)
      const sharedAges = await Promise.all(drops.keys.map(dropShared))
      drops.keys.forEach((key, index) => {
        const age = sharedAges[index]
        if (age !== undefined) ages.set(key, age)
      })
      const message = JSON.stringify({ from: replica, keys: drops.keys, installationToken: drops.installationToken })
      await connection.run('EVAL', (client) =>
        client.eval(REMEMBER_AND_ANNOUNCE, { keys: [...keysOf(delivery), channel], arguments: [String(DELIVERY_MEMORY_SECONDS), message] }),
      )
      return [...ages.values()]
    },
  }
}
