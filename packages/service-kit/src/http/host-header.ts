import fp from 'fastify-plugin'

/**
 * HTTP/1.1 requires a Host header: a request without one is answered 400 in the
 * service's shape (Node's own check, turned off in `createServer`, answers an empty body).
 */
export const hostHeader = fp(
  async (app) => {
    app.addHook('onRequest', (request, _reply, done) => {
      if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
        done(Object.assign(new Error('Host header is required'), { statusCode: 400 }))
        return
      }
      done()
    })
  },
  { name: 'host-header', fastify: '5.x' },
)
