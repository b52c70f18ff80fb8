/**
 * `command`'s outcome, or a rejection with `expired()` when it has not settled within `ms`:
 * for clients whose own timeouts miss a command already written to a socket that went silent.
 * The rejection waits one turn of the event loop for I/O already received, so that when this
 * process was busy past the deadline an answer sitting in the socket still wins, and a slow
 * process is not mistaken for a hung server.
 */
export function withDeadline<T>(command: Promise<T>, ms: number, expired: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(() => reject(expired())), ms)
    command.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: Error) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
