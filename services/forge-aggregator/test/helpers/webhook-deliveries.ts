import { randomUUID } from 'node:crypto'
import type { Readable } from 'node:stream'
import { sign } from '@octokit/webhooks-methods'
import type { FastifyInstance } from 'fastify'

/** The secret the tests' GitHub App signs its deliveries with (`FORGE_WEBHOOK_SECRET`). */
export const WEBHOOK_SECRET = 'test-webhook-secret'
export const WEBHOOK_PATH = '/api/forge/webhooks'

/** How one delivery is sent: what GitHub does, unless a test says otherwise. */
export interface DeliveryOptions {
  /** `X-GitHub-Delivery`; a new GUID unless given. */
  id?: string
  /** `X-Hub-Signature-256` as sent; null sends none. GitHub's, over the body, unless given. */
  signature?: string | null
  /** The body as sent, instead of the payload's JSON (signed as sent, unless `signature` says otherwise). */
  body?: string | Buffer | Readable
  /** More headers, over GitHub's. */
  headers?: Record<string, string>
}

export interface Delivered {
  id: string
  statusCode: number
  json: () => Record<string, unknown>
}

/** The fake GitHub's side of an App's webhook: it signs and sends deliveries, and sends them again. */
export interface GitHubDeliveries {
  /** Signs `payload` with the secret and posts it to `app` as a new delivery of `event`. */
  deliver(app: FastifyInstance, event: string, payload: unknown, options?: DeliveryOptions): Promise<Delivered>
  /** Sends delivery `id` again to `app`, as GitHub's "Redeliver" does: the same id, body and signature. */
  redeliver(app: FastifyInstance, id: string): Promise<Delivered>
}

/** Deliveries signed with `secret` (`X-Hub-Signature-256`: sha256= and the body's HMAC-SHA256 in hex), as GitHub sends them. */
export function githubDeliveries(secret = WEBHOOK_SECRET): GitHubDeliveries {
  const sent = new Map<string, { event: string; body: string; signature: string }>()

  async function post(app: FastifyInstance, id: string, event: string, body: string | Buffer | Readable, signature: string | null, headers: Record<string, string> = {}) {
    const response = await app.inject({
      method: 'POST',
      url: WEBHOOK_PATH,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/test',
        'x-github-event': event,
        'x-github-delivery': id,
        'x-github-hook-id': '1',
        ...(signature === null ? {} : { 'x-hub-signature-256': signature }),
        ...headers,
      },
      payload: body,
    })
    return { id, statusCode: response.statusCode, json: () => response.json<Record<string, unknown>>() }
  }

  return {
    async deliver(app, event, payload, options = {}) {
      const id = options.id ?? randomUUID()
      const body = options.body ?? JSON.stringify(payload)
      // A body given as bytes or a stream carries the signature the test gives it, or none.
      const signature = options.signature !== undefined ? options.signature : typeof body === 'string' ? await sign(secret, body) : null
      if (typeof body === 'string' && signature !== null) sent.set(id, { event, body, signature })
      return post(app, id, event, body, signature, options.headers)
    },
    async redeliver(app, id) {
      const delivery = sent.get(id)
      if (!delivery) throw new Error(`no delivery ${id} was sent`)
      return post(app, id, delivery.event, delivery.body, delivery.signature)
    },
  }
}

/** GitHub's payloads, with the fields the service reads and a few it must not log. */
export const payloads = {
  star: (owner: string, repo: string, action = 'created') => ({
    action,
    starred_at: '2026-01-01T00:00:00Z',
    repository: { name: repo, full_name: `${owner}/${repo}`, description: 'PAYLOAD-DESCRIPTION', owner: { login: owner, type: 'User' } },
    sender: { login: 'PAYLOAD-SENDER' },
    installation: { id: 9001 },
  }),
  issue: (author: string, action = 'opened') => ({
    action,
    issue: { number: 1, title: 'PAYLOAD-TITLE', user: { login: author } },
    repository: { name: 'hello', owner: { login: 'someone' } },
  }),
  installation: (action: string, id: number) => ({ action, installation: { id, account: { login: 'PAYLOAD-ACCOUNT' } } }),
}
