// A test's view of the logs: a destination that keeps every line a logger writes, and readings of
// them (how Redis outages were logged).
import { waitForFound } from './waiting.ts'

/** One JSON log line as a service wrote it. */
export type LogLine = Record<string, unknown> & { level: number; msg?: string }

/** Every line a logger wrote to `destination`, as written (raw text) and parsed. */
export interface CapturedLogs {
  /** What to give the logger (`createLogger(level, logs.destination)`): pino writes each line here. */
  readonly destination: { write(line: string): void }
  readonly lines: LogLine[]
  /** Everything written, as the bytes a log shipper would see. */
  text(): string
  /** Resolves with the first line (already written or to come) that `matches`; rejects after `timeoutMs`. */
  waitFor(matches: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>
}

/** A destination for a test's logger that keeps every line, and lets the test wait for one. */
export function captureLogs(): CapturedLogs {
  const raw: string[] = []
  const lines: LogLine[] = []
  const waiting = new Set<() => void>()
  return {
    destination: {
      write(line: string) {
        raw.push(line)
        lines.push(JSON.parse(line) as LogLine)
        for (const check of waiting) check()
      },
    },
    lines,
    text: () => raw.join(''),
    waitFor: (matches, timeoutMs = 5_000) => waitForFound(waiting, () => lines.find(matches), timeoutMs, () => `no such log line within ${timeoutMs} ms`),
  }
}

const OUTAGE = 'Redis unavailable; reconnecting in the background'
const RECOVERY = 'Redis connection ready'

/**
 * Each Redis connection's outage and recovery lines (service-kit's), by its `purpose`, in the
 * order written: `down` for an outage, `up` for its end. A connection that logs each outage once
 * never has two `down`s in a row, however many commands failed; a failover on a busy machine may
 * still be two outages (a deadline missed just after the reconnection), each logged once.
 */
export function redisOutages(lines: LogLine[]): Map<string, Array<'down' | 'up'>> {
  const outages = new Map<string, Array<'down' | 'up'>>()
  for (const line of lines) {
    if (line.msg !== OUTAGE && line.msg !== RECOVERY) continue
    const purpose = String(line.purpose)
    const events = outages.get(purpose) ?? []
    events.push(line.msg === OUTAGE ? 'down' : 'up')
    outages.set(purpose, events)
  }
  return outages
}

/** Whether some outage was logged twice without its end between: a line per failure, not per outage. */
export function repeatsAnOutage(events: Array<'down' | 'up'>): boolean {
  return events.some((event, index) => event === 'down' && events[index - 1] === 'down')
}
