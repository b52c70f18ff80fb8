/**
 * `command`'s outcome, or a rejection with `expired()` when it has not settled within `ms` of
 * being written: for clients whose own timeouts miss a command already written to a socket that
 * went silent. Only Redis's time counts, never this process's own work (docs/design.md, "The
 * Redis command deadline"). The clock starts on the next turn of the event loop, when the client
 * has written the command (node-redis writes the commands of one turn together, in
 * `setImmediate`), not when it was asked for: a process busy with a burst of requests may take
 * longer than `ms` to get there. And once `ms` have passed, the rejection waits one more turn for
 * I/O already received, so that an answer sitting in the socket behind this process's work wins.
 */
export function withDeadline<T>(command: Promise<T>, ms: number, expired: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    let settled = false
    let timer: NodeJS.Timeout | undefined
    startOnNextTurn(() => {
      if (!settled) timer = setTimeout(() => setImmediate(() => reject(expired())), ms)
    })
    command.then(
      (value) => {
        settled = true
        clearTimeout(timer)
        resolve(value)
      },
      (error: Error) => {
        settled = true
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

/** The clocks of the commands sent this turn, started together on the next. */
let unstarted: Array<() => void> = []

function startOnNextTurn(start: () => void): void {
  if (unstarted.length === 0) setImmediate(startClocks)
  unstarted.push(start)
}

function startClocks(): void {
  const starting = unstarted
  unstarted = []
  for (const start of starting) start()
}
