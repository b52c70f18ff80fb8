import { readFileSync } from 'node:fs'

/**
 * A ratio measures the service's own code only when the load generator is not the bottleneck,
 * that is when the HTTP ceiling (a bare route) reaches at least this many times the service's
 * requests/s in the same run.
 */
export const MIN_HEADROOM = 2

/** Whether a run measured the service, and the line a bench prints to say so. */
export function loadGeneratorHeadroom(ceiling: { name: string; requestsPerSecond: number }, serviceRequestsPerSecond: number) {
  const headroom = ceiling.requestsPerSecond / serviceRequestsPerSecond
  const clientBound = headroom < MIN_HEADROOM
  const line = clientBound
    ? `CLIENT-BOUND: the ${ceiling.name} reached only ${headroom.toFixed(2)} x the service's requests/s (it must reach ${MIN_HEADROOM} x). ` +
      'The load generator, not the service, may set the pace in this run: its ratios mean nothing.'
    : `${ceiling.name} / service: ${headroom.toFixed(2)}  (>= ${MIN_HEADROOM}: the load generator is not the bottleneck)`
  return { headroom, clientBound, line }
}

/**
 * CPU time (user + system, every thread) process `pid` has used, in µs, from /proc: on a shared
 * two-core machine the rate a server reaches moves with its neighbours and with the load
 * generator, its cost per request much less. Undefined where there is no /proc.
 */
export function cpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    // Fields 14 and 15 (utime, stime) in clock ticks of 10 ms (USER_HZ is 100 on Linux);
    // the command name, field 2, is in parentheses and may hold spaces.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}
