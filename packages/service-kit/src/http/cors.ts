// CORS for the origins `CORS_ORIGINS` names (none without it), exposing the headers clients read.
import fastifyCors from '@fastify/cors'
import fp from 'fastify-plugin'

export interface CorsOptions {
  /** `CORS_ORIGINS`: no CORS headers at all when unset. */
  origins?: readonly string[] | undefined
  /** The methods a browser may use across origins. */
  methods: string[]
  /** The service's own response headers a browser script on another origin may read. */
  exposedHeaders: readonly string[]
}

/** What the kit itself sets that a client relies on: every answer's request id, and a 429's wait. */
const KIT_EXPOSED_HEADERS = ['X-Request-Id', 'Retry-After']

/** CORS for the configured origins (`*` for any), exposing the kit's headers and the service's. */
export const cors = fp<CorsOptions>(
  async (app, { origins, methods, exposedHeaders }) => {
    if (!origins) return
    await app.register(fastifyCors, {
      origin: origins.includes('*') ? '*' : [...origins],
      // @fastify/cors allows only GET, HEAD and POST unless told otherwise.
      methods,
      exposedHeaders: [...KIT_EXPOSED_HEADERS, ...exposedHeaders],
    })
  },
  { name: 'cors', fastify: '5.x' },
)
