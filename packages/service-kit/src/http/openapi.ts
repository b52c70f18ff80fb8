// The OpenAPI document and Swagger UI under `/docs`, made from the routes' own schemas so that
// they never differ from what the routes validate and send.
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'

export interface OpenApiOptions {
  /** The OpenAPI document's `info`. */
  title: string
  version: string
  description: string
}

/**
 * The OpenAPI document at `/docs/json` and Swagger UI at `/docs`, from the routes' own schemas.
 * Registered before any route, so that it sees them all.
 */
export const openapi = fp<OpenApiOptions>(
  async (app, info) => {
    await app.register(swagger, {
      openapi: { info: { title: info.title, version: info.version, description: info.description } },
      // Registered with `openapi`, the document is always OpenAPI 3.
      transformObject: (document) => declareRequestIdHeader((document as { openapiObject: object }).openapiObject),
    })
    await app.register(swaggerUi, { routePrefix: '/docs' })
  },
  { name: 'openapi', fastify: '5.x' },
)

type OpenApiPaths = Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>>

/** Every answer carries `X-Request-Id`: declared once here rather than in every route's schema. */
function declareRequestIdHeader<Document extends object>(document: Document): Document {
  const header = { description: "the caller's X-Request-Id when well-formed, else a new UUID", schema: { type: 'string' } }
  // @fastify/swagger always writes `paths`, and `responses` for every operation.
  const { paths } = document as { paths: OpenApiPaths }
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses)) {
        response.headers = { 'X-Request-Id': header, ...response.headers }
      }
    }
  }
  return document
}
