import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { parseJson } from '../parse-json.ts'

/**
 * What this service writes to Redis and reads back: another version of the service, a bug or an
 * operator may have left anything there, so every value read is checked against its schema and
 * a value that fails is a miss. A change that a version running beside this one during a rollout
 * would read wrongly must change `STORE_FORMAT_VERSION`, so that the two never read each other's
 * entries; a change both read rightly keeps it, and with it everything the two share (answers,
 * locks, the budget, webhook drops: docs/design.md, "Rollouts and stored entries").
 */
export const STORE_FORMAT_VERSION = 'v2'

/** A produced answer, serialized once, as it is sent and kept. */
export const CachedAnswer = Type.Object({
  /** The JSON body, serialized with the route's schema. */
  body: Type.String(),
  /** A strong validator of `body`. */
  etag: Type.String({ pattern: '^"[^"]+"$' }),
  /** Statistics the answer could not fill. */
  partial: Type.Array(Type.String()),
  /** Whether the answer shows a private repository: no shared cache downstream may keep it. */
  isPrivate: Type.Boolean(),
  /** When it was produced, on the wall clock (ms): replicas compare it. */
  producedAt: Type.Number(),
  /** When it stops being fresh. */
  freshUntil: Type.Number(),
  /** When it may no longer be served even stale. */
  keepUntil: Type.Number(),
})

/**
 * The last body of an upstream URL, as far as the service reads it, and its ETag. The text is
 * kept, not the parsed object: it occupies what its length says, so the bound on held bytes is a
 * real one. With a `shape`, the text is the projection of the body made for the schema of that
 * fingerprint (`projectionOf`); without one, the whole body, as versions before projections held
 * it. Versions before projections read the entry as its `text` alone: a projection passes their
 * checks, which name the same fields.
 */
export const HeldProjection = Type.Object({ etag: Type.String({ minLength: 1 }), text: Type.String(), shape: Type.Optional(Type.String({ minLength: 1 })) })

/** What the upstream last said about one rate-limit resource, on the wall clock (ms). */
export const BudgetState = Type.Object({
  limit: Type.Integer({ minimum: 0 }),
  remaining: Type.Integer({ minimum: 0 }),
  /** When the upstream refills the resource (`X-RateLimit-Reset`). */
  resetAt: Type.Number({ minimum: 0 }),
  /** No call before this: a rate-limit answer said to wait (`Retry-After`, or the reset). */
  blockedUntil: Type.Number({ minimum: 0 }),
})

/**
 * Whether an account installed a public GitHub App, and which installation (docs/github-app.md,
 * "A public App"): `null` when it has none, or a suspended one. Never a token: tokens stay in memory.
 */
export const RememberedLookup = Type.Object({ id: Type.Union([Type.String({ pattern: '^[0-9]+$' }), Type.Null()]) })

export type CachedAnswer = Static<typeof CachedAnswer>
export type HeldProjection = Static<typeof HeldProjection>
export type BudgetState = Static<typeof BudgetState>
export type RememberedLookup = Static<typeof RememberedLookup>

/** The kinds of stored entries, as `forge_shared_entries_rejected_total{kind}` names them. */
export type StoredKind = 'answer' | 'held' | 'budget' | 'installation'

/** One kind of stored entry: its checks, compiled once. */
export interface StoredEntry<T> {
  kind: StoredKind
  /** The value when `text` is JSON that passes the schema; undefined otherwise. */
  parse(text: string): T | undefined
}

function storedEntry<Schema extends TSchema>(kind: StoredKind, schema: Schema): StoredEntry<Static<Schema>> {
  const check = TypeCompiler.Compile(schema)
  return {
    kind,
    parse(text) {
      const value = parseJson(text)
      return check.Check(value) ? value : undefined
    },
  }
}

export const storedEntries = {
  answer: storedEntry('answer', CachedAnswer),
  held: storedEntry('held', HeldProjection),
  budget: storedEntry('budget', BudgetState),
  installation: storedEntry('installation', RememberedLookup),
}
