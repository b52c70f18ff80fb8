// items-list's process entry point, and the only place its environment is read: everything else
// is `buildApp`, run by service-kit's `runService`.
import { runService } from '@repo/service-kit/run-service'
import { ItemsListConfig } from './config.ts'

await runService({
  name: 'items-list',
  config: ItemsListConfig,
  env: process.env,
  // Imported once tracing, when asked for, has started: it instruments the Redis client as it loads.
  start: async (config, options) => (await import('./app.ts')).buildApp(config, options),
})
