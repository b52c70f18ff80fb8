// items-list's HTTP schemas (TypeBox): they validate requests, serialize answers and make the
// OpenAPI document, and the types come from them, so nothing is declared twice.
import { Type, type Static } from '@sinclair/typebox'

/** 1 to 1024 characters of well-formed Unicode: a lone surrogate could not round-trip through Redis. */
const NAME = { minLength: 1, maxLength: 1024, pattern: '^\\P{Cs}*$' }
export const ItemName = Type.String(NAME)

export const NewItem = Type.Object(
  { name: Type.String({ ...NAME, description: 'Not "." or "..": a URL cannot address them, so no DELETE could reach them.' }) },
  { description: 'Other fields are ignored.' },
)
export type NewItem = Static<typeof NewItem>

/**
 * The names a WHATWG URL parser (browsers, `fetch`, undici) turns into path steps: `/items/%2E%2E`
 * becomes `/`, so a name a client could append it could never delete.
 */
export const UNADDRESSABLE_NAMES: ReadonlySet<string> = new Set(['.', '..'])

export const ItemNameParams = Type.Object({ item_name: ItemName })
export type ItemNameParams = Static<typeof ItemNameParams>

/** IETF httpapi idempotency-key draft: one key per request a client may retry. */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x20-\\x7E]+$',
      description:
        '1–255 printable ASCII characters. A retry with the same key and name appends nothing and gets the first answer again, with Idempotent-Replayed: true; the same key with another name is refused (422).',
    }),
  ),
})

/** The longest page a caller may ask for. */
export const MAX_PAGE_NAMES = 10_000

export const ListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_PAGE_NAMES,
      description: `Answer at most this many names (1–${MAX_PAGE_NAMES}); a Link header with rel="next" leads to the rest. Without it, the whole list.`,
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 256,
      pattern: '^[A-Za-z0-9_-]+$',
      description: 'Where to go on from: opaque, taken from the Link header of the page before.',
    }),
  ),
})
export type ListQuery = Static<typeof ListQuery>

export const Message = Type.Object({ message: Type.String() })
export const ItemList = Type.Object(
  { items: Type.Array(Type.String()) },
  {
    description: 'Names in insertion order. Every name in the list for the whole read appears once, even while others append and delete.',
    headers: {
      Link: {
        type: 'string',
        description: 'With limit, when more names follow: `</items/?limit=N&cursor=…>; rel="next"` (RFC 8288)',
      },
    },
  },
)
export const ErrorDetail = Type.Object({ detail: Type.String() })
export type ErrorDetail = Static<typeof ErrorDetail>

/** `/health` and `/ready`: `{"status":"ok"}`, `{"status":"ready"}`. */
export const Status = Type.Object({ status: Type.String() })

/** The answer to an append, first or replayed. */
export const Added = Type.Object(Message.properties, {
  description: 'Appended, or, for a repeated Idempotency-Key, appended by the first request',
  headers: {
    'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'present when this answers a repeated Idempotency-Key' },
  },
})
