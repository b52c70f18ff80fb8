import fp from 'fastify-plugin'
import type { FastifyReply } from 'fastify'
import type { ForgeAggregatorConfig } from '../config.ts'
import type { Produced } from '../forge/service.ts'
import type { RequestContext } from '../upstream/request-context.ts'
import { cacheStatus, matchesEtag } from './headers.ts'
import { createCacheResultCounter } from './metrics.ts'
import { ResponseCache, type Endpoint, type ServedAnswer } from './response-cache.ts'

/**
 * The response cache as the routes use it: `reply.sendAnswer`, one answer path from a route's key
 * and production to the reply with its cache headers.
 */

/** What a route asks of `reply.sendAnswer`. */
export interface SendAnswerOptions {
  endpoint: Endpoint
  /** The answer's cache key: one per answer, however the request spelled it. */
  key: string
  /** Makes the answer from the upstream; called only when no fresh answer is held. */
  produce: (context: RequestContext) => Promise<Produced<unknown>>
  /** What the endpoint answers when producing fails and there is nothing to send stale: an `HttpError`, or the error itself. */
  errorAnswer: (error: unknown) => unknown
}

declare module 'fastify' {
  interface FastifyReply {
    /**
     * Sends the answer for `key` (docs/design.md, "Caching", "Stale answers"): fresh from the
     * cache, or produced (once for every concurrent request), or stale when producing fails;
     * serialized with the route's 200 schema, with `Cache-Status`, `ETag`, `Cache-Control` (and 304
     * for a matching `If-None-Match`), `Age` when stale, `X-Forge-Partial` and `no-store` when
     * partial. A failure is answered with the endpoint's `errorAnswer`.
     */
    sendAnswer(options: SendAnswerOptions): void | Promise<void>
  }
  interface FastifyInstance {
    /** The answers of both endpoints: what a webhook delivery drops (docs/webhooks.md). */
    answerCache: ResponseCache
  }
}

export interface ResponseCachePluginOptions {
  config: Pick<ForgeAggregatorConfig, 'FORGE_CACHE_TTL_SECONDS' | 'FORGE_STALE_SECONDS'>
  /** Bytes of answers kept in this process (`cacheMemory`). */
  answerBytes: number
  now: () => number
}

/**
 * The response cache of both endpoints (answers shared through `app.sharedCache` when there is
 * one, `forge_cache_results_total`) and the one path a cached answer takes from route to reply,
 * `reply.sendAnswer`.
 */
export const responseCache = fp<ResponseCachePluginOptions>(
  async (app, { config, answerBytes, now }) => {
    const cache = new ResponseCache({
      ttlSeconds: config.FORGE_CACHE_TTL_SECONDS,
      staleSeconds: config.FORGE_STALE_SECONDS,
      maxBytes: answerBytes,
      now,
      store: app.sharedCache?.store,
      lock: app.sharedCache?.lock,
      onResult: createCacheResultCounter(app.metrics),
    })
    app.decorate('answerCache', cache)

    app.decorateReply('sendAnswer', function sendAnswer(this: FastifyReply, { endpoint, key, produce, errorAnswer }: SendAnswerOptions): void | Promise<void> {
      const served = cache.get(
        key,
        async (context) => {
          const produced = await produce(context)
          // Serialized once, with the route's own schema, whatever the number of requests it answers.
          return { ...produced, body: this.serializeInput(produced.body as Record<string, unknown>, '200') as string }
        },
        { endpoint, log: this.request.log },
      )
      // A fresh answer held here is sent at once: no promise, no turn of the event loop.
      if (!(served instanceof Promise)) return void send(this, served)
      return served.then(
        (settled) => void send(this, settled),
        (error: unknown) => {
          throw errorAnswer(error)
        },
      )
    })

    function send(reply: FastifyReply, served: ServedAnswer): FastifyReply {
      const { answer } = served
      const secondsLeft = cache.secondsLeft(answer)
      reply.header('cache-status', cacheStatus(served, secondsLeft))
      if (answer.partial.length > 0) {
        return reply
          .headers({ 'cache-control': 'no-store', 'x-forge-partial': answer.partial.join(', ') })
          .type('application/json; charset=utf-8')
          .send(answer.body)
      }
      const scope = answer.isPrivate ? 'private' : 'public'
      if (served.result === 'stale') {
        reply.headers({ etag: answer.etag, 'cache-control': `${scope}, max-age=0`, age: String(cache.ageOf(answer)) })
      } else {
        reply.headers({ etag: answer.etag, 'cache-control': `${scope}, max-age=${secondsLeft}` })
      }
      if (matchesEtag(reply.request.headers['if-none-match'], answer.etag)) return reply.code(304).send()
      return reply.type('application/json; charset=utf-8').send(answer.body)
    }
  },
  { name: 'response-cache', fastify: '5.x', dependencies: ['shared-cache'] },
)
