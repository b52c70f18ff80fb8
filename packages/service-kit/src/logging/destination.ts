// Where log lines go: stdout, in batches written synchronously, the cheapest way per line that
// still loses none at exit.
import { pino, type DestinationStream } from 'pino'

/** Lines wait in memory until this many bytes are ready… */
const LOG_BATCH_LENGTH = 4096
/** …or at most this long, when fewer arrive. */
const LOG_FLUSH_INTERVAL_MS = 1_000

/**
 * Where a service's log lines go: stdout, in batches of about 4 KB, or every second when fewer
 * arrive, because a write per line costs throughput; written synchronously, because pino's
 * asynchronous mode costs more than the write (docs/benchmarks.md). Whatever still waits is written
 * when the process exits, after a shutdown or a crash alike: 'exit' comes last, after
 * close-with-grace has logged either.
 */
export function stdoutInBatches(): DestinationStream {
  const destination = pino.destination({ dest: 1, minLength: LOG_BATCH_LENGTH, periodicFlush: LOG_FLUSH_INTERVAL_MS, sync: true })
  process.on('exit', () => destination.flushSync())
  return destination
}
