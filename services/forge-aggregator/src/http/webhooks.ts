import { createHash } from 'node:crypto'
import { isUtf8 } from 'node:buffer'
import type { IncomingMessage } from 'node:http'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { verify } from '@octokit/webhooks-methods'
import { HttpError } from '@repo/http-errors'
import { ErrorBody } from './schemas.ts'
import { parseJson } from '../parse-json.ts'
import { createDeliveries } from '../webhooks/deliveries.ts'
import { dropsFor, eventLabel } from '../webhooks/events.ts'
import { createWebhookMetrics, type DeliveryOutcome } from '../webhooks/metrics.ts'

/**
 * The `POST /api/forge/webhooks` route (docs/webhooks.md): a GitHub App's signed deliveries, read
 * as raw bytes, verified, then applied.
 */

/**
 * The largest body read. The events used are a few KB; only a push of hundreds of commits (its
 * payload lists up to 2,048) comes near it, and the TTL covers that one. GitHub caps payloads at
 * 25 MB, and every unsigned body would be held and hashed up to the bound before it is refused.
 * Anything over the bound is refused unread, as unsigned.
 */
export const WEBHOOK_BODY_LIMIT = 1024 * 1024

/** GitHub's delivery ids are GUIDs; anything else is not GitHub's, and is neither remembered nor logged. */
const DELIVERY_ID = /^[0-9A-Fa-f-]{1,64}$/

export interface WebhookPluginOptions {
  /** `FORGE_WEBHOOK_SECRET` (or its file's content). */
  secret: string
  /** `FORGE_APP_INSTALLATION_ID`: the installation whose deletion drops the token. */
  installationId: string | undefined
  /** `FORGE_APP_PUBLIC`: every installation's `installation` events count (docs/webhooks.md). */
  publicApp?: boolean
}

/** What the body parser gives the route: the raw bytes, or the mark of a body over the bound. */
type RawBody = Buffer | typeof TOO_LARGE
const TOO_LARGE = Symbol('too large')

/**
 * POST /api/forge/webhooks (docs/webhooks.md): a GitHub App's deliveries drop the answers they
 * change, on every replica. Registered only with a secret. The route reads its body as raw bytes
 * (its own parser, bounded), checks `X-Hub-Signature-256` over exactly those bytes before anything
 * is parsed, and answers anything unsigned, wrongly signed, over the bound or not JSON 401,
 * changing nothing. A signed delivery is exempt from the per-client rate limit; any other request
 * counts against it.
 */
export const webhookRoutes: FastifyPluginAsync<WebhookPluginOptions> = async (app, { secret, installationId, publicApp = false }) => {
  const metrics = createWebhookMetrics(app.metrics)
  const deliveries = createDeliveries({
    cache: app.answerCache,
    credentials: app.forge.credentials,
    shared: app.sharedCache,
    logger: app.log,
  })
  /** The bytes of each request whose signature holds. */
  const verified = new WeakMap<FastifyRequest, Buffer>()

  // Every content type, JSON or not, reaches the route as bytes: the signature is over the bytes.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (request, payload, done) => void readBounded(request.raw, payload).then((body) => done(null, body), done))

  app.post<{ Body: RawBody | undefined }>(
    '/api/forge/webhooks',
    {
      schema: {
        summary: "A GitHub App's webhook delivery: drops the cached answers it changes",
        description: 'Signed with X-Hub-Signature-256; enabled by FORGE_WEBHOOK_SECRET. See docs/webhooks.md.',
        response: {
          200: Type.Object({ outcome: Type.String({ description: 'applied, repeat or ignored' }) }),
          401: ErrorBody,
          503: ErrorBody,
        },
      },
      // Before the rate limit's own hook (it runs where the route says, after this one): it needs the verdict.
      preHandler: async (request) => {
        const { body } = request
        if (body instanceof Buffer && (await isSigned(body, request.headers['x-hub-signature-256']))) verified.set(request, body)
      },
      config: { rateLimit: { hook: 'preHandler', allowList: (request: FastifyRequest) => verified.has(request) } },
    },
    async (request) => {
      const event = header(request, 'x-github-event')
      const id = header(request, 'x-github-delivery')
      const label = eventLabel(event)
      const done = (outcome: DeliveryOutcome, owner?: string) => {
        metrics.delivery(label, outcome)
        // The event, the delivery id and the owner: nothing else of what was sent is logged.
        request.log.info({ webhook: { event: label, delivery: id !== undefined && DELIVERY_ID.test(id) ? id : undefined, owner, outcome } }, 'webhook delivery')
        return { outcome }
      }
      const body = verified.get(request)
      if (body === undefined) {
        done('bad_signature')
        throw new HttpError(401, { error: 'Webhook signature missing or invalid' })
      }
      const payload = parseJson(body.toString('utf8'))
      if (payload === undefined || event === undefined || id === undefined || !DELIVERY_ID.test(id)) {
        done('malformed')
        throw new HttpError(401, { error: 'Webhook delivery is not JSON with its event and delivery id' })
      }

      const drops = dropsFor(event, payload, installationId, publicApp)
      if (!drops) return done('ignored')
      const delivery = { id, digest: createHash('sha256').update(body).digest('hex') }
      try {
        if (await deliveries.isRepeat(delivery)) return done('repeat', drops.owner)
        for (const age of await deliveries.apply(delivery, drops)) metrics.droppedAnswerAge(age)
      } catch (error) {
        done('failed', drops.owner)
        throw new HttpError(503, { error: 'Webhook delivery could not be applied; redeliver it' }, { cause: error })
      }
      return done('applied', drops.owner)
    },
  )

  async function isSigned(body: Buffer, signature: string | string[] | undefined): Promise<boolean> {
    // Bytes that are not UTF-8 would be verified as the text they decode to, not as sent.
    if (body.length === 0 || !isUtf8(body) || typeof signature !== 'string' || signature === '') return false
    return verify(secret, body.toString('utf8'), signature)
  }
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return typeof value === 'string' ? value : undefined
}

/**
 * The body's bytes, or `TOO_LARGE` as soon as it is known to exceed the bound (its
 * `Content-Length`, or what arrived): the rest is let through unread, and not kept. Rejects, as a
 * client error, when the stream fails (the client went away). Not `parseAs: 'buffer'`: Fastify
 * would answer 413 past its `bodyLimit`, where a body over the bound must be refused as unsigned,
 * with the rest unread.
 */
function readBounded(raw: IncomingMessage, payload: NodeJS.ReadableStream): Promise<RawBody> {
  return new Promise((resolve, reject) => {
    if (Number(raw.headers['content-length']) > WEBHOOK_BODY_LIMIT) {
      payload.resume()
      return resolve(TOO_LARGE)
    }
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= WEBHOOK_BODY_LIMIT) return void chunks.push(chunk)
      payload.removeListener('data', onData)
      payload.resume()
      resolve(TOO_LARGE)
    }
    payload.on('data', onData)
    payload.once('end', () => resolve(Buffer.concat(chunks)))
    // A stream that fails (the client went away mid-body) is the client's doing: 400, as Fastify's own parsers make it.
    payload.once('error', (error: Error) => reject(Object.assign(error, { statusCode: 400 })))
  })
}
