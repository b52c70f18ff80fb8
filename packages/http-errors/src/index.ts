export { HttpError } from './http-error.ts'
export { errorHandling, frameworkErrorHandler, type ErrorHandlingOptions } from './error-handling.ts'
