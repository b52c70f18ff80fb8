// The package's entry point: the error a route throws to choose its answer, and the handlers that
// send every error in the service's shape.
export { HttpError } from './http-error.ts'
export { errorHandling, frameworkErrorHandler, type ErrorHandlingOptions } from './error-handling.ts'
