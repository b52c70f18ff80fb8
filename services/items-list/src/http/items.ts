// The list's routes under `/items/`: append, read (whole or by pages), delete every occurrence of a
// name, each turning the store's refusals into the spec's statuses.
import { Readable } from 'node:stream'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { HttpError } from '@repo/http-errors'
import { ForeignPositionError, type ItemStore, type Page, type ReadPosition } from '../store/item-store.ts'
import { decodeCursor, encodeCursor } from './cursor.ts'
import { Added, ErrorDetail, IdempotencyHeaders, ItemList, ItemNameParams, ListQuery, Message, NewItem, UNADDRESSABLE_NAMES } from './schemas.ts'

const STORE_DOWN = { 503: ErrorDetail }
const BAD_BODY = { 400: ErrorDetail, 413: ErrorDetail, 415: ErrorDetail, 422: ErrorDetail }
/** The 201's body, written once: the same bytes the `Added` schema would serialize, without serializing them per append. */
const ADDED = JSON.stringify({ message: 'Item added successfully' })
const JSON_TYPE = 'application/json; charset=utf-8'

/** The list itself: append, read (whole or by pages), delete every occurrence of a name. */
export const itemRoutes: FastifyPluginAsyncTypebox<{ maxCount: number }> = async (app, { maxCount }) => {
  const store = app.itemStore
  const bodyOf = createLastBody()
  const full = () => new HttpError(507, { detail: `The list is full: it holds ${maxCount} names, the most it may` })

  app.post(
    '/items/',
    {
      schema: {
        summary: 'Append a name to the end of the list',
        headers: IdempotencyHeaders,
        body: NewItem,
        response: { 201: Added, ...BAD_BODY, ...STORE_DOWN, 507: ErrorDetail },
      },
    },
    async (request, reply) => {
      const { name } = request.body
      if (UNADDRESSABLE_NAMES.has(name)) throw new HttpError(422, { detail: 'body/name must not be "." or "..": a URL cannot address them' })
      const idempotencyKey = request.headers['idempotency-key']
      const outcome = idempotencyKey === undefined ? await store.append(name) : await store.appendOnce(name, idempotencyKey)
      if (outcome === 'full') throw full()
      if (outcome === 'conflict') throw new HttpError(422, { detail: 'Idempotency-Key was already used with another name' })
      if (outcome === 'replayed') reply.header('idempotent-replayed', 'true')
      return sendAdded(reply)
    },
  )

  app.get(
    '/items/',
    {
      schema: {
        summary: 'Every name, in insertion order; or a page of them',
        description:
          'Without limit, the whole list, sent as it is read. With limit, at most that many names, and a Link header to the next page while more follow.',
        querystring: ListQuery,
        response: { 200: ItemList, 304: Type.Null({ description: 'Not modified: If-None-Match names the list as it is (whole list only)' }), 400: ErrorDetail, ...STORE_DOWN },
      },
      // The server's validator coerces nothing (a body's 1 must not pass for the name "1"); a
      // query string is all text, and `limit` is the integer its digits spell.
      // A hook, not a per-part compiler: Ajv's coerceTypes would pass "1e3", " 5" or "0x10", and a wrapping compiler needs @fastify/ajv-compiler.
      preValidation(request, _reply, done) {
        const query = request.query as Record<string, unknown>
        if (typeof query.limit === 'string' && /^\d{1,15}$/.test(query.limit)) query.limit = Number(query.limit)
        done()
      },
      // A bad limit or cursor is the caller's to fix (400), where a bad body is 422.
      attachValidation: true,
    },
    async (request, reply) => {
      if (request.validationError) throw new HttpError(400, { detail: request.validationError.message })
      const { limit, cursor } = request.query
      const from = cursor === undefined ? undefined : (decodeCursor(cursor) ?? badCursor())
      try {
        if (limit !== undefined) return await sendPage(reply, store, from, limit)
        if (from === undefined) {
          const asked = request.headers['if-none-match']
          // Only the header read: a list unchanged is not read again.
          const version = asked === undefined ? undefined : await store.version()
          if (asked !== undefined && version !== undefined && matches(asked, version)) return reply.code(304).header('etag', etagOf(version)).send(null)
        }
        return await sendList(reply, store, from, bodyOf)
      } catch (error) {
        if (error instanceof ForeignPositionError) badCursor('cursor is from another list')
        throw error
      }
    },
  )

  app.delete(
    '/items/:item_name',
    {
      schema: {
        summary: 'Delete every occurrence of a name',
        description: 'The name is percent-decoded: `a%20b` deletes "a b", `a%2Fb` deletes "a/b".',
        params: ItemNameParams,
        response: { 200: Message, 404: ErrorDetail, 422: ErrorDetail, ...STORE_DOWN },
      },
    },
    async (request) => {
      const name = request.params.item_name
      const removed = await store.removeAll(name)
      if (removed === 0) throw new HttpError(404, { detail: 'Item not found' })
      return { message: `Item ${name} deleted successfully` }
    },
  )
}

/** The 201, its body as the `Added` schema writes it. */
function sendAdded(reply: FastifyReply) {
  return reply.code(201).type(JSON_TYPE).send(ADDED)
}

/** The list's version as a weak validator (an ETag has no spaces). */
function etagOf(version: string): string {
  return `W/"${version.replaceAll(' ', '.')}"`
}

/** Whether `If-None-Match` names `version` (weak comparison, RFC 9110). */
function matches(ifNoneMatch: string, version: string): boolean {
  const tag = etagOf(version).slice(2)
  return ifNoneMatch.split(',').some((asked) => {
    const trimmed = asked.trim()
    return trimmed === '*' || (trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed) === tag
  })
}

function badCursor(detail = 'cursor is not one this service gave'): never {
  throw new HttpError(400, { detail })
}

/** `limit` names from `from`, and the link to the next page while more follow. */
async function sendPage(reply: FastifyReply, store: ItemStore, from: ReadPosition | undefined, limit: number) {
  const { names, next } = await store.page(from, limit)
  // Relative (RFC 8288 resolves it against the request's URL): right behind any proxy or port.
  if (next) reply.header('link', `</items/?limit=${limit}&cursor=${encodeCursor(next)}>; rel="next"`)
  return reply.type(JSON_TYPE).send(`{"items":${JSON.stringify(names)}}`)
}

/**
 * The whole list from `from`. A list read in one step is sent as one body; a longer one is written
 * as it is read, a step whenever the client has taken the last (backpressure), so that neither
 * memory nor any Redis command grows with the list. The first step is read before the status is
 * sent, so that a Redis already unavailable is still a 503; a failure later cuts the answer short
 * (the client sees it end without its last chunk, never a list that looks whole).
 */
async function sendList(reply: FastifyReply, store: ItemStore, from: ReadPosition | undefined, bodyOf: (names: string[]) => string) {
  const gone = new AbortController()
  const steps = store.steps(from, gone.signal)
  // The first step always comes: nothing stops the read before it.
  const first = (await steps.next()).value!
  reply.type(JSON_TYPE)
  if (from === undefined && first.version !== undefined) reply.header('etag', etagOf(first.version))
  if (!first.next) return reply.send(bodyOf(first.names))
  // HEAD has no body: nothing more to read for it, nor the step read ahead.
  if (reply.request.method === 'HEAD') {
    void steps.return()
    return reply.send(Readable.from([]))
  }
  reply.raw.once('close', () => gone.abort())
  return reply.send(Readable.from(listBody(first.names, steps), { objectMode: false }))
}

/**
 * One app's last whole-list body, and the names it holds: the held list comes back as the same
 * frozen array while it is unchanged, and is serialized once.
 */
function createLastBody(): (names: string[]) => string {
  let last: { names: string[]; body: string } | undefined
  return (names) => {
    if (last?.names !== names) last = { names, body: `{"items":${JSON.stringify(names)}}` }
    return last.body
  }
}

/** `{"items":[…]}`, a piece per read step: the names already read, then the rest as they come. */
async function* listBody(first: string[], rest: AsyncIterable<Page>): AsyncGenerator<string> {
  yield `{"items":[${JSON.stringify(first).slice(1, -1)}`
  let separator = first.length > 0 ? ',' : ''
  for await (const { names } of rest) {
    if (names.length === 0) continue
    yield `${separator}${JSON.stringify(names).slice(1, -1)}`
    separator = ','
  }
  yield ']}'
}
