import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Dispatcher } from 'undici'
import { loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { captureLogs, eventually, type CapturedLogs } from '@repo/test-support'
import { buildApp } from '../../src/app.ts'
import { ForgeAggregatorConfig } from '../../src/config.ts'
import { API } from './upstream.ts'

/** Environment variables as a test writes them: numbers and lists are turned into their text. */
export type TestEnv = Partial<Record<keyof ForgeAggregatorConfig, string | number | readonly string[]>>

export interface BuildOptions {
  /** The service's environment, over `FORGE_API_URL` = nock's API; every other default is the schema's. */
  env?: TestEnv
  /** The clock to share with other apps of the test; one of its own unless given. */
  clock?: TestClock
  /** The undici dispatcher the upstream client builds on. */
  dispatcher?: Dispatcher
}

/** A wall clock that only moves when the test says so, starting at the real time. */
export interface TestClock {
  now: () => number
  advance: (ms: number) => void
}

export function testClock(): TestClock {
  let time = Math.floor(Date.now() / 1000) * 1000
  return { now: () => time, advance: (ms) => (time += ms) }
}

export interface TestAggregator {
  app: FastifyInstance
  /** Every line the app logged (at trace level: everything the service can log). */
  logs: CapturedLogs
  /** Moves the clock of the cache and the budget forward. */
  advanceClock: (ms: number) => void
  /** The current time on that clock (ms). */
  now: () => number
  /** The value of one series on `/metrics`, or undefined when it is not there. */
  metric: (name: string, labels?: Record<string, string>) => Promise<number | undefined>
}

/**
 * The app exactly as production builds it (`buildApp` on the real configuration schema), upstream
 * at nock's API unless `env` says otherwise, on a clock the test controls, logging everything.
 */
export async function buildAggregator(t: Test, options: BuildOptions = {}): Promise<TestAggregator> {
  const clock = options.clock ?? testClock()
  const env = Object.fromEntries(
    Object.entries({ FORGE_API_URL: API, ...options.env }).map(([name, value]) => [name, Array.isArray(value) ? value.join(',') : String(value)]),
  )
  const config = loadConfig(ForgeAggregatorConfig, env)
  const logs = captureLogs()
  const app = await buildApp(config, { logger: createLogger('trace', logs.destination), clock, ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}) })
  t.teardown(() => app.close())
  if (config.REDIS_URL || config.REDIS_SENTINELS) {
    // Ready to share: Redis answers, and the replica hears other replicas' announcements.
    await logs.waitFor((line) => line.msg === 'listening for production announcements').catch(() => {
      throw new Error('the shared cache never became available')
    })
  }
  return {
    app,
    logs,
    advanceClock: clock.advance,
    now: clock.now,
    metric: async (name, labels = {}) => metricValue((await app.inject({ url: '/metrics' })).body, name, labels),
  }
}

/**
 * Resolves once `count` requests have come in (their `incoming request` lines). From there to the
 * response cache nothing waits on I/O, so an upstream reply held until then finds them all waiting
 * on one production.
 */
export async function untilRequestsIn(logs: CapturedLogs, count: number): Promise<void> {
  if (!(await eventually(async () => logs.lines.filter((line) => line.msg === 'incoming request').length >= count))) throw new Error(`fewer than ${count} requests came in`)
}

/** Resolves with the line of the first upstream call answered `statusCode`, once the client has read that answer. */
export function untilUpstreamAnswered(logs: CapturedLogs, statusCode: number): Promise<unknown> {
  return logs.waitFor((line) => line.msg === 'upstream call' && (line.upstream as { statusCode?: number } | undefined)?.statusCode === statusCode)
}

/** The value of the series `name{labels…}` in a Prometheus text page (labels not named may be anything). */
export function metricValue(page: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of page.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!match || match[1] !== name) continue
    const found = new Map<string, string>()
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) found.set(key!, value!)
    if (Object.entries(labels).every(([key, value]) => found.get(key) === value)) return Number(match[3])
  }
  return undefined
}
