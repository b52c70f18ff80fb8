/**
 * Where the upstream is and how a request to it is addressed: the API root, the headers every
 * request carries, and paths in which no input can change which resource is asked for.
 */

/** The REST API version every request pins (spec: "pinned to 2022-11-28"). */
const API_VERSION = '2022-11-28'

/** Where every call goes, and the headers it always carries. */
export interface Upstream {
  origin: string
  /** The API root's path (`/api/v3` on GitHub Enterprise), without a trailing slash. */
  basePath: string
  /** The headers of every request, the REST API version pinned. */
  pinned: Record<string, string>
}

/** The upstream at `baseUrl` (`https://api.github.com`, or a GitHub Enterprise `https://host/api/v3`). */
export function upstreamOf(baseUrl: string, userAgent: string): Upstream {
  const base = new URL(baseUrl)
  return {
    origin: base.origin,
    basePath: base.pathname.replace(/\/+$/, ''),
    pinned: { accept: 'application/vnd.github+json', 'x-github-api-version': API_VERSION, 'user-agent': userAgent },
  }
}

/**
 * An upstream path in which every interpolated value is percent-encoded as exactly one path
 * segment, so that no input can change which resource is asked for.
 */
export function upstreamPath(strings: TemplateStringsArray, ...segments: string[]): string {
  return String.raw({ raw: strings }, ...segments.map(encodeSegment))
}

function encodeSegment(segment: string): string {
  if (segment === '' || segment === '.' || segment === '..') {
    throw new TypeError(`"${segment}" cannot be an upstream path segment`)
  }
  return encodeURIComponent(segment)
}
