// The change feed's Prometheus metrics: streams open, events sent, resumes, snapshots and why,
// streams ended for a slow client, and when the replica's reader last heard from Redis.
import { Counter, Gauge, type Registry } from 'prom-client'
import type { SnapshotReason, StreamReports } from './event-stream.ts'

const EVENT_TYPES = ['reset', 'append', 'remove', 'synced'] as const
const REASONS: readonly SnapshotReason[] = ['no_id', 'too_old', 'reset', 'failover']

export interface EventMetrics {
  reports: StreamReports
  streamOpened(): void
  streamClosed(): void
}

/** The metrics in `registry`; `lastAnswer` is read at each scrape. */
export function createEventMetrics(registry: Registry, lastAnswer: () => number): EventMetrics {
  const open = new Gauge({ name: 'items_events_streams_open', help: 'Event streams (GET /items/events) open on this replica', registers: [registry] })
  const sent = new Counter({ name: 'items_events_sent_total', help: 'Events sent to watchers, by type', labelNames: ['type'], registers: [registry] })
  const resumes = new Counter({ name: 'items_events_resumes_total', help: 'Event streams resumed from their Last-Event-ID without a snapshot', registers: [registry] })
  const snapshots = new Counter({
    name: 'items_events_snapshots_total',
    help: 'Snapshots sent (reset, the list, synced), by why: no_id, too_old (trimmed away), reset (the list replaced or moved in), failover (Redis lost events)',
    labelNames: ['reason'],
    registers: [registry],
  })
  const slow = new Counter({ name: 'items_events_slow_ended_total', help: 'Event streams ended because their client did not take ITEMS_EVENTS_BUFFER_BYTES queued for it', registers: [registry] })
  new Gauge({
    name: 'items_events_reader_last_answer_seconds',
    help: "Unix time of the events reader's last answer from Redis (a blocking read answers at least every 5 s)",
    registers: [registry],
    collect() {
      this.set(lastAnswer())
    },
  })
  for (const type of EVENT_TYPES) sent.inc({ type }, 0)
  for (const reason of REASONS) snapshots.inc({ reason }, 0)
  return {
    reports: {
      sent: (type, count) => sent.inc({ type }, count),
      resumed: () => resumes.inc(),
      snapshot: (reason) => snapshots.inc({ reason }),
      slow: () => slow.inc(),
    },
    streamOpened: () => open.inc(),
    streamClosed: () => open.dec(),
  }
}
