import { Counter, Histogram, type Registry } from 'prom-client'
import { KNOWN_EVENTS } from './events.ts'

/**
 * The webhook route's metrics (docs/monitoring.md, "Metrics"): deliveries by event and outcome,
 * and the age of the answers they dropped.
 */

/**
 * What became of one delivery: applied (its drops are done), a repeat, ignored (nothing this
 * service answers changed), bad_signature (unsigned, wrongly signed, or a body over the bound:
 * 401), malformed (signed, but not JSON or without its event and delivery id: 401), failed (the
 * replicas could not be told: 503, and not remembered, so a redelivery applies it).
 */
export type DeliveryOutcome = 'applied' | 'repeat' | 'ignored' | 'bad_signature' | 'malformed' | 'failed'
const OUTCOMES: readonly DeliveryOutcome[] = ['applied', 'repeat', 'ignored', 'bad_signature', 'malformed', 'failed']

export interface WebhookMetrics {
  delivery(event: string, outcome: DeliveryOutcome): void
  /** The age (ms) of a fresh answer a drop made stale. */
  droppedAnswerAge(ms: number): void
}

/**
 * `forge_webhook_deliveries_total{event,outcome}` (every series from the start, at 0; `event` one
 * of the known events or `other`) and `forge_webhook_dropped_answer_age_seconds`: how stale the
 * TTL alone would have let the dropped answers become.
 */
export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const deliveries = new Counter({
    name: 'forge_webhook_deliveries_total',
    help: 'Webhook deliveries by event and what became of them',
    labelNames: ['event', 'outcome'] as const,
    registers: [registry],
  })
  for (const event of [...KNOWN_EVENTS, 'other']) for (const outcome of OUTCOMES) deliveries.inc({ event, outcome }, 0)
  const ages = new Histogram({
    name: 'forge_webhook_dropped_answer_age_seconds',
    help: 'Age of each fresh answer a webhook delivery made stale',
    buckets: [1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600],
    registers: [registry],
  })
  return {
    delivery: (event, outcome) => deliveries.inc({ event, outcome }),
    droppedAnswerAge: (ms) => ages.observe(ms / 1000),
  }
}
