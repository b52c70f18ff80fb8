export { HttpError } from './http-error.ts'
export { registerErrorHandling, describeError, type ErrorHandlingOptions } from './error-handling.ts'
