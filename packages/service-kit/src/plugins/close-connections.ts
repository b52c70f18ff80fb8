import fp from 'fastify-plugin'

/**
 * Once `app.close()` has begun, every response ends its connection. A keep-alive connection
 * whose request was in flight at shutdown would otherwise stay open after its answer and hold
 * `close()` until its idle timeout, 72 s by default (fastify/fastify#7044).
 */
export const closeConnectionsOnShutdown = fp(
  async (app) => {
    let closing = false
    app.addHook('preClose', async () => {
      closing = true
    })
    // A callback hook, not an async one: it runs on every answer, and a promise each is not free.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closing) reply.header('connection', 'close')
      done(null, payload)
    })
  },
  { name: 'close-connections-on-shutdown', fastify: '5.x' },
)
