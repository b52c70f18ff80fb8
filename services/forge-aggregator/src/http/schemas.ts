import { Type, type Static, type TSchema } from '@sinclair/typebox'

/**
 * The HTTP schemas the routes share: error bodies, the 304 and 403 answers, the cache headers of a
 * 200.
 */

const header = (description: string) => ({ type: 'string', description })

/** The response headers of an answer from the cache (docs/design.md, "Caching"), as the OpenAPI document shows them. */
const CACHING_HEADERS = {
  ETag: header('strong validator of the body; send it back in If-None-Match'),
  'Cache-Control': header('public (private when the answer holds private data), max-age = seconds the answer stays fresh'),
  'Cache-Status': header('RFC 9211: how the shared cache produced the answer (hit, miss, collapsed, revalidated, stale)'),
  Age: header('seconds since the answer was produced'),
}

/** A success schema with the headers a cached answer carries. */
export const withCacheHeaders = <T extends TSchema>(schema: T, extraHeaders: Record<string, unknown> = {}) =>
  Type.Unsafe<Static<T>>({ ...schema, headers: { ...CACHING_HEADERS, ...extraHeaders } })

export const ErrorBody = Type.Object({ error: Type.String() })
export const RateLimited = Type.Object(
  { error: Type.String() },
  {
    description: 'The upstream rate limit is spent or access is forbidden',
    headers: { 'Retry-After': header('seconds until the upstream budget resets, when known') },
  },
)
export const FailureBody = Type.Object({ error: Type.String(), details: Type.String() })
export const NotModified = Type.Null({
  description: "Not Modified: the caller's If-None-Match matched the current ETag",
  headers: { ETag: CACHING_HEADERS.ETag, 'Cache-Control': CACHING_HEADERS['Cache-Control'] },
})

