import fastifyCors from '@fastify/cors'
import fp from 'fastify-plugin'

export interface CorsOptions {
  /** `CORS_ORIGINS`: no CORS headers at all when unset. */
  origins?: readonly string[] | undefined
  /** The methods a browser may use across origins. */
  methods: string[]
}

/** Response headers a browser script on another origin may read. */
const EXPOSED_HEADERS = ['ETag', 'Retry-After', 'X-Forge-Partial', 'Cache-Status', 'Age', 'X-Request-Id']

/** CORS for the configured origins (`*` for any), exposing the headers clients rely on. */
export const cors = fp<CorsOptions>(
  async (app, { origins, methods }) => {
    if (!origins) return
    await app.register(fastifyCors, {
      origin: origins.includes('*') ? '*' : [...origins],
      // @fastify/cors allows only GET, HEAD and POST unless told otherwise.
      methods,
      exposedHeaders: EXPOSED_HEADERS,
    })
  },
  { name: 'cors', fastify: '5.x' },
)
