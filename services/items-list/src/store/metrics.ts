import { Counter, Histogram, type Registry } from 'prom-client'
import type { CommandOutcome } from '@repo/service-kit'

/** The Redis commands the store sends, as `command` label values. */
export const STORE_COMMANDS = ['rpush', 'append_once', 'lrange', 'lrem', 'ping'] as const
export type StoreCommand = (typeof STORE_COMMANDS)[number]

const OUTCOMES: readonly CommandOutcome[] = ['ok', 'error', 'timeout']

/** From 100 µs: a healthy Redis answers in well under a millisecond; the deadline is 500 ms. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

/** `items_store_up`: the Redis connection's gauge (`createRedisConnection`'s `up`). */
export const STORE_UP_GAUGE = { name: 'items_store_up', help: '1 while Redis answers the item store, else 0' }

/**
 * `items_store_commands_total` {command, outcome} and `items_store_command_duration_seconds`
 * {command} in `registry`; returns what records one command (`createRedisConnection`'s
 * `onCommand`). Every series is created up front, so a scrape shows zeros rather than nothing
 * before the first failure.
 */
export function createStoreMetrics(registry: Registry): (command: string, outcome: CommandOutcome, seconds: number) => void {
  const commands = new Counter({
    name: 'items_store_commands_total',
    help: 'Redis commands sent by the item store, by outcome',
    labelNames: ['command', 'outcome'],
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'items_store_command_duration_seconds',
    help: 'Time from sending a Redis command to its answer, error or deadline',
    labelNames: ['command'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  })
  for (const command of STORE_COMMANDS) {
    for (const outcome of OUTCOMES) commands.inc({ command, outcome }, 0)
    duration.zero({ command })
  }

  // Only the store's own commands are sent on its connection (`createItemStore` names them).
  return (command, outcome, seconds) => {
    commands.inc({ command, outcome })
    duration.observe({ command }, seconds)
  }
}
