// The store's Prometheus metrics: its commands by outcome and duration, its refusals, the list's
// size, and whether Redis answers.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { CommandOutcome } from '@repo/service-kit'

/**
 * What the store sends, as `command` label values: each a Redis script, command or round trip of
 * commands, all bounded whatever the list's length (a read or a delete of a long list is many).
 */
export const STORE_COMMANDS = ['append', 'append_once', 'read', 'held_list', 'remove_step', 'migrate_step', 'counts', 'check', 'reset', 'version', 'events_state', 'events_snapshot', 'events_read'] as const
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

/**
 * `items_store_inconsistent_total` {command} in `registry`: commands refused because the list's
 * keys disagree (docs/list.md, "When the keys disagree"); returns what counts one.
 */
export function createInconsistencyMetric(registry: Registry): (command: StoreCommand) => void {
  const refused = new Counter({
    name: 'items_store_inconsistent_total',
    help: "Item store commands refused because the list's keys disagree (an index deleted by hand, two lists to move in)",
    labelNames: ['command'],
    registers: [registry],
  })
  for (const command of STORE_COMMANDS) refused.inc({ command }, 0)
  return (command) => refused.inc({ command })
}

/** Group sizes up to the largest a group may be (`MAX_GROUP_APPENDS`). */
const GROUP_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128]

/**
 * `items_store_append_group_size` in `registry`: how many appends each script call of appends
 * carried (docs/list.md, "Appends in groups"); returns what records one group.
 */
export function createAppendGroupMetric(registry: Registry): (size: number) => void {
  const sizes = new Histogram({
    name: 'items_store_append_group_size',
    help: 'Appends committed together by one script call (1: an append alone)',
    buckets: GROUP_SIZE_BUCKETS,
    registers: [registry],
  })
  return (size) => sizes.observe(size)
}

/** What `createListMetrics` reads from Redis at each scrape (the store's `counts()`). */
export interface ListCounts {
  /** Names in the list. */
  nameCount: number
  /** Of them, names an earlier version's list still holds, to be moved into the chunks. */
  unmigratedNameCount: number
}

/**
 * `items_list_names`, `items_list_max_names` and `items_list_unmigrated_names` in `registry`, read
 * from Redis at each scrape (`counts`), for the alert that warns of a list nearing its cap and to
 * follow an upgrade's migration. A scrape while Redis is unavailable (`isAvailable`) sends it
 * nothing and keeps the last figures: `items_store_up` says why they are old.
 */
export function createListMetrics(registry: Registry, maxCount: number, counts: () => Promise<ListCounts>, isAvailable: () => boolean): void {
  // prom-client collects every metric at once: the two gauges share one read.
  let pending: Promise<ListCounts | undefined> | undefined
  const read = async () => {
    if (!isAvailable()) return undefined
    return (pending ??= counts()
      .catch(() => undefined)
      .finally(() => (pending = undefined)))
  }
  const gaugeOf = (name: string, help: string, figure: (counts: ListCounts) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const counted = await read()
        if (counted) this.set(figure(counted))
      },
    })
  gaugeOf('items_list_names', 'Names in the list', (counts) => counts.nameCount)
  gaugeOf('items_list_unmigrated_names', "Names of an earlier version's list not yet moved into the chunks (0 once an upgrade is done)", (counts) => counts.unmigratedNameCount)
  new Gauge({ name: 'items_list_max_names', help: 'ITEMS_MAX_COUNT: appends past it are refused (507)', registers: [registry] }).set(maxCount)
}
