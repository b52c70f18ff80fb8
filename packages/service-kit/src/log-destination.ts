import { pino, type DestinationStream } from 'pino'

/** Where a batch goes: a synchronous, unbuffered sonic-boom in production, a file in tests. */
export interface LineSink {
  write(data: string): unknown
  flushSync(): void
}

/**
 * Log lines kept in memory and handed to the sink as one string once `batchLength` characters
 * are waiting, or when `flush()` is called.
 *
 * Why not sonic-boom's own `minLength`: it measures its whole pending buffer again
 * (`Buffer.byteLength`) on every write, which cost about 11k instructions per access line at
 * 4 KB, almost as much as pino spends formatting the line (about 13k). Here a write is a push
 * and an addition; the batch is joined once.
 */
export class LineBatches implements DestinationStream {
  readonly #sink: LineSink
  readonly #batchLength: number
  #lines: string[] = []
  #length = 0

  constructor(sink: LineSink, batchLength: number) {
    this.#sink = sink
    this.#batchLength = batchLength
  }

  write(line: string): void {
    this.#lines.push(line)
    this.#length += line.length
    if (this.#length >= this.#batchLength) this.flush()
  }

  /** Hands what is waiting to the sink; pino's `logger.flush(callback)` lands here. */
  flush(callback?: (error?: Error) => void): void {
    if (this.#lines.length > 0) {
      const batch = this.#lines.join('')
      this.#lines = []
      this.#length = 0
      this.#sink.write(batch)
    }
    callback?.()
  }

  /** Everything waiting, written before this returns: for the process's `exit` event. */
  flushSync(): void {
    this.flush()
    this.#sink.flushSync()
  }
}

/** Batches of log lines written synchronously to stdout (see `runService` for why). */
export function stdoutInBatches(batchLength: number): LineBatches {
  return new LineBatches(pino.destination({ dest: 1, sync: true }), batchLength)
}
