// Every failure answered in the service's JSON shape, in one place: the error and not-found
// handlers, and the one for errors Fastify finds before routing.
import fp from 'fastify-plugin'
import type { FastifyError, FastifyReply, FastifyServerOptions, preHandlerHookHandler } from 'fastify'
import { HttpError } from './http-error.ts'

export interface ErrorHandlingOptions {
  /** The service's error body for a message: `{ detail }` for items-list, `{ error }` for the aggregator. */
  errorBody: (message: string) => Record<string, unknown>
  /** The body of an unexpected failure; defaults to `errorBody('Internal Server Error')`. */
  internalErrorBody?: Record<string, unknown>
  /** Status for a request that fails its schema; 400 unless the service decides otherwise. */
  validationStatus?: number
  /** Turns the service's own error types into answers; `undefined` means "not mine". */
  mapError?: (error: unknown) => HttpError | undefined
  /** Runs before a request that matches no route is answered 404 (the rate limit's hook). */
  notFoundPreHandler?: preHandlerHookHandler | undefined
}

/** Errors are answers for this request only: no cache may keep them. */
const ERROR_HEADERS = { 'cache-control': 'no-store' }

/**
 * The error and not-found handlers, so that every failure, ours or the framework's, is answered
 * in the service's JSON shape. Client errors keep their message; anything unexpected is logged
 * (under pino's `err` key) and answered 500 with a fixed body, never a stack trace.
 */
export const errorHandling = fp<ErrorHandlingOptions>(
  async (app, options) => {
    const { errorBody, validationStatus = 400, mapError } = options
    const internalErrorBody = options.internalErrorBody ?? errorBody('Internal Server Error')

    const notFound = { ...(options.notFoundPreHandler ? { preHandler: options.notFoundPreHandler } : {}) }
    app.setNotFoundHandler(notFound, (_request, reply) => {
      return reply.code(404).headers(ERROR_HEADERS).send(errorBody('Not Found'))
    })

    app.setErrorHandler<FastifyError>((error, request, reply) => {
      const answer = error instanceof HttpError ? error : mapError?.(error)
      if (answer) {
        const level = answer.statusCode >= 500 ? 'warn' : 'info'
        request.log[level]({ err: answer.cause ?? answer }, 'request failed')
        return reply.code(answer.statusCode).headers({ ...ERROR_HEADERS, ...answer.headers }).send(answer.body)
      }

      if (error.validation || error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
        // An empty JSON body is a missing body: the same answer as a request without one. The
        // message is Fastify's ("body/name must be string") or a route's `schemaErrorFormatter`.
        const message = error.validation ? error.message : 'body must be object'
        request.log.info({ reason: message }, 'request rejected')
        return reply.code(validationStatus).headers(ERROR_HEADERS).send(errorBody(message))
      }

      const statusCode = error.statusCode ?? 500
      if (statusCode >= 400 && statusCode < 500) {
        // Fastify's client errors (bad JSON, 413, 415, ...) carry fixed, safe messages.
        request.log.info({ reason: error.message }, 'request rejected')
        return reply.code(statusCode).headers(ERROR_HEADERS).send(errorBody(error.message))
      }

      request.log.error({ err: error }, 'unexpected error')
      return reply.code(500).headers(ERROR_HEADERS).send(internalErrorBody)
    })
  },
  { name: 'error-handling', fastify: '5.x' },
)

/**
 * Fastify's `frameworkErrors` option: errors found before routing (a malformed percent-encoding
 * in the URL) bypass the error handler, so they get the service's shape here. They are the
 * client's doing, hence 400.
 */
export function frameworkErrorHandler(
  options: Pick<ErrorHandlingOptions, 'errorBody'>,
): NonNullable<FastifyServerOptions['frameworkErrors']> {
  return (error, request, reply) => {
    request.log.info({ reason: error.message }, 'request rejected')
    void (reply as FastifyReply).code(400).headers(ERROR_HEADERS).send(options.errorBody(error.message))
  }
}
