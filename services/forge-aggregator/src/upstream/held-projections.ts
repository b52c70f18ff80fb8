import type { TSchema } from '@sinclair/typebox'
import type { TypeCheck } from '@sinclair/typebox/compiler'
import { LRUCache } from 'lru-cache'
import { parseJson } from '../parse-json.ts'
import type { SharedStore } from '../shared-cache/store.ts'
import { storedEntries, type HeldProjection } from '../shared-cache/stored.ts'
import { projectionOf } from './projection.ts'

/**
 * The held projections (docs/design.md, "Held projections"): the projection and ETag of every
 * upstream URL's last body, kept so that the next call for it carries `If-None-Match` and a 304
 * rebuilds the body from what is held.
 */
export interface HeldProjections {
  get(target: string): Promise<HeldProjection | undefined>
  hold(target: string, projection: HeldProjection): void
}

/**
 * Held projections: the replicas' shared ones when a store is given (each for `heldForMs` after
 * its last use), else this process's own (at most `maxBytes`; with 0 none is read). An entry's
 * shape is not counted: it is one string per schema, shared by every entry made with it.
 */
export function heldProjections(maxBytes: number, store: SharedStore | undefined, heldForMs: number): HeldProjections {
  const local = maxBytes > 0 ? new LRUCache<string, HeldProjection>({ maxSize: maxBytes, sizeCalculation: (entry) => entry.text.length + entry.etag.length }) : undefined
  return {
    async get(target) {
      if (!local) return undefined
      return (await store?.get(storedEntries.held, `held:${target}`)) ?? local.get(target)
    },
    hold(target, projection) {
      local?.set(target, projection)
      void store?.set(`held:${target}`, JSON.stringify(projection), heldForMs)
    },
  }
}

/**
 * A held entry as `check`'s caller may reuse it, or undefined when it cannot be read as one: then
 * the call goes out without `If-None-Match`, and its 200 replaces the entry. An entry projected
 * for another schema (another version of the service) cannot be read: it may lack a field this
 * schema reads. One without a shape is a whole body (written before projections were held), from
 * which this projection is made; it is held as one from its first 304 on.
 */
export function readHeldProjection<Schema extends TSchema>(entry: HeldProjection, check: TypeCheck<Schema>): { entry: HeldProjection; body: Schema['static'] } | undefined {
  const projection = projectionOf(check)
  if (entry.shape !== undefined && entry.shape !== projection.shape) return undefined
  const parsed = parsedBody(check, entry.text)
  if (!('body' in parsed)) return undefined
  const body = projection.project(parsed.body)
  const text = entry.shape === undefined ? JSON.stringify(body) : entry.text
  return { entry: { etag: entry.etag, shape: projection.shape, text }, body }
}

/** `text` as JSON that passes `check`, or what is wrong with it. */
export function parsedBody<Schema extends TSchema>(check: TypeCheck<Schema>, text: string): { body: Schema['static'] } | { failure: string } {
  const body = parseJson(text)
  if (body === undefined) return { failure: 'Upstream sent a body that is not valid JSON' }
  if (check.Check(body)) return { body }
  // A body that fails its check has at least one error.
  const { path, message } = check.Errors(body).First()!
  return { failure: `Upstream sent an unexpected body (${path || '/'}: ${message})` }
}
