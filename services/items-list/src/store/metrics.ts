import type { Registry } from 'prom-client'
import { SeriesCounter, SeriesHistogram, type CommandOutcome, type CounterSeries } from '@repo/service-kit'

/** The Redis commands the store sends, as `command` label values. */
export const STORE_COMMANDS = ['rpush', 'append_once', 'lrange', 'lrem', 'ping'] as const
export type StoreCommand = (typeof STORE_COMMANDS)[number]

/** From 100 µs: a healthy Redis answers in well under a millisecond; the deadline is 500 ms. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

/** `items_store_up`: the Redis connection's gauge (`createRedisConnection`'s `up`). */
export const STORE_UP_GAUGE = { name: 'items_store_up', help: '1 while Redis answers the item store, else 0' }

/**
 * `items_store_commands_total` {command, outcome} and `items_store_command_duration_seconds`
 * {command} in `registry`; returns what records one command (`createRedisConnection`'s
 * `onCommand`). Every series is created up front, so a scrape shows zeros rather than nothing
 * before the first failure, and recording a command costs no label lookup (`SeriesCounter`,
 * `SeriesHistogram`).
 */
export function createStoreMetrics(registry: Registry): (command: string, outcome: CommandOutcome, seconds: number) => void {
  const byCommand = <T>(make: (command: StoreCommand) => T) =>
    Object.fromEntries(STORE_COMMANDS.map((command) => [command, make(command)])) as Record<StoreCommand, T>
  const commands = new SeriesCounter({
    name: 'items_store_commands_total',
    help: 'Redis commands sent by the item store, by outcome',
    labelNames: ['command', 'outcome'],
    registers: [registry],
  })
  const counted = byCommand((command) => ({
    ok: commands.series({ command, outcome: 'ok' }),
    error: commands.series({ command, outcome: 'error' }),
    timeout: commands.series({ command, outcome: 'timeout' }),
  })) satisfies Record<StoreCommand, Record<CommandOutcome, CounterSeries>>
  const duration = new SeriesHistogram({
    name: 'items_store_command_duration_seconds',
    help: 'Time from sending a Redis command to its answer, error or deadline',
    labelNames: ['command'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  })

  const timed = byCommand((command) => duration.series({ command }))

  return (command, outcome, seconds) => {
    // Only the store's own commands are sent on its connection (`createItemStore` names them).
    counted[command as StoreCommand][outcome].inc()
    timed[command as StoreCommand].observe(seconds)
  }
}
