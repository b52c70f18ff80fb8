import type { Test } from 'tap'
import { pino } from 'pino'
import type { FastifyInstance } from 'fastify'
import { buildApp, type AppConfig } from '../../src/app.ts'
import { createForgeClient, type ForgeClient } from '../../src/forge-client.ts'
import { API } from './upstream.ts'

export const DEFAULT_CONFIG: AppConfig = {
  FORGE_DEFAULT_USER: 'octocat',
  FORGE_CACHE_TTL_SECONDS: 60,
  FORGE_CACHE_MAX_MB: 64,
  FORGE_FOLLOWERS_LIMIT: 30,
  FORGE_MAX_REPO_PAGES: 10,
}

export interface BuildOptions {
  config?: Partial<AppConfig>
  baseUrl?: string
  timeoutMs?: number
  revalidationMaxBytes?: number
}

export interface TestAggregator {
  app: FastifyInstance
  client: ForgeClient
  /** Every log line, as written (trace level: everything the service can log). */
  logLines: string[]
  /** Moves the response cache's clock forward. */
  advanceClock: (ms: number) => void
}

/** The production app and upstream client, pointed at nock (or `baseUrl`), on a clock the test controls. */
export async function buildAggregator(t: Test, options: BuildOptions = {}): Promise<TestAggregator> {
  const config = { ...DEFAULT_CONFIG, ...options.config }
  const logLines: string[] = []
  const logger = pino({ level: 'trace' }, { write: (line: string) => logLines.push(line) })
  let clock = 1_000_000
  const client = createForgeClient({
    baseUrl: options.baseUrl ?? API,
    token: config.FORGE_TOKEN,
    timeoutMs: options.timeoutMs ?? 2_000,
    userAgent: 'forge-aggregator/test',
    revalidationMaxBytes: options.revalidationMaxBytes ?? 1024 * 1024,
    logger,
  })
  const app = await buildApp(config, { client, logger, now: () => clock })
  t.teardown(async () => {
    await app.close()
    await client.close()
  })
  return { app, client, logLines, advanceClock: (ms) => (clock += ms) }
}
