/**
 * DESIGN §10: a ratio measures the service only when the load generator is not the bottleneck,
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
