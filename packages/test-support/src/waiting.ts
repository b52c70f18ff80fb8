/**
 * Resolves with the first value `find` returns (checked now, then each time a listener in
 * `listeners` is called, as new output arrives); rejects with `failure()` after `timeoutMs`.
 */
export function waitForFound<T>(listeners: Set<() => void>, find: () => T | undefined, timeoutMs: number, failure: () => string): Promise<T> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = find()
      if (found === undefined) return
      cleanup()
      resolve(found)
    }
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(failure()))
    }, timeoutMs)
    const cleanup = () => {
      clearTimeout(timer)
      listeners.delete(check)
    }
    listeners.add(check)
    check()
  })
}
