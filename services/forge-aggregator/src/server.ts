import { runService } from '@repo/service-kit/run-service'
import { ForgeAggregatorConfig } from './config.ts'

/**
 * The process entry point: runs the service from the environment (the only place it is read), and
 * nothing else.
 */

await runService({
  name: 'forge-aggregator',
  config: ForgeAggregatorConfig,
  env: process.env,
  // Imported once tracing, when asked for, has started: it instruments the Redis client as it loads.
  start: async (config, options) => (await import('./app.ts')).buildApp(config, options),
})
