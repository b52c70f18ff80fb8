export { HttpError } from './http-error.ts'
export { registerErrorHandling, frameworkErrorHandler, describeError, type ErrorHandlingOptions } from './error-handling.ts'
