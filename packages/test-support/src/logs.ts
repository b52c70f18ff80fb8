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
