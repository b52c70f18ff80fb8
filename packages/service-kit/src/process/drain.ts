// The drain on shutdown: `/ready` answers 503 and every answer closes its connection, so that
// balancers take the replica out while it still serves.
import fp from 'fastify-plugin'
import type { preHandlerHookHandler } from 'fastify'

declare module 'fastify' {
  interface FastifyInstance {
    /** True from `startDraining()`, or from the start of `close()`, on. */
    readonly draining: boolean
    /**
     * Tells balancers to go elsewhere while the app still serves (docs/shutdown.md, *The
     * rule*): from now on the readiness route answers 503 and every answer ends its
     * connection. `runService` calls it on SIGTERM, `SHUTDOWN_DELAY_SECONDS` before it closes the
     * app.
     */
    startDraining(): void
    /** The readiness route's `preHandler`: 503 `Shutting down`, in the service's error shape, while draining. */
    notReadyWhileDraining: preHandlerHookHandler
  }
}

export interface DrainOptions {
  /** The service's error body for a message. */
  errorBody: (message: string) => Record<string, unknown>
}

/**
 * The drain's state, in one place for both services. While draining, every response carries
 * `Connection: close`: clients and balancers reconnect, and find another replica, instead of
 * reusing a connection to one that is about to stop accepting. It also holds from the start of
 * `close()` on: a keep-alive connection whose request was in flight at shutdown would otherwise
 * stay open after its answer and hold `close()` until its idle timeout, 72 s by default
 * (fastify/fastify#7044).
 */
export const drain = fp<DrainOptions>(
  async (app, { errorBody }) => {
    let draining = false
    app.decorate('draining', {
      getter: () => draining,
    })
    app.decorate('startDraining', () => {
      draining = true
    })
    app.addHook('preClose', async () => {
      draining = true
    })
    const shuttingDown = errorBody('Shutting down')
    // Answered here rather than thrown: a balancer probing every half second would otherwise
    // put a warning line in the log each time.
    app.decorate<preHandlerHookHandler>('notReadyWhileDraining', (_request, reply, done) => {
      if (!draining) return done()
      void reply.code(503).header('cache-control', 'no-store').send(shuttingDown)
    })
    // A callback hook, not an async one: it runs on every answer, and a promise each is not free.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (draining) reply.header('connection', 'close')
      done(null, payload)
    })
  },
  { name: 'drain', fastify: '5.x' },
)
