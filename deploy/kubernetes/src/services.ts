// By path, not as workspace dependencies: a package depending on the services would take part in
// building their production bundles (scripts/bundle-service.sh).
import { ForgeAggregatorConfig } from '../../../services/forge-aggregator/src/config.ts'
import { ItemsListConfig } from '../../../services/items-list/src/config.ts'
import type { ServiceDescription } from './checks.ts'

/**
 * The services the base deploys, each with the schema of the settings it reads: the same object
 * its server validates the environment with. Both give up on a graceful shutdown 8 s after their
 * drain's delay, `SHUTDOWN_DELAY_SECONDS` (@repo/service-kit).
 */
export const SERVICES: Readonly<Record<string, ServiceDescription>> = {
  'forge-aggregator': {
    config: ForgeAggregatorConfig,
    shutdownSeconds: 8,
    // Its in-process caches grow to FORGE_CACHE_MAX_MB (MiB). Measured with the heap Node sizes in
    // a 512 MiB container and REDIS_URL set, as this base runs it (pnpm --dir
    // services/forge-aggregator bench:memory --container-mb=512 --redis 8 32 64 128): peaks of
    // 237, 239, 304 and 366 MiB; two runs fit 216–219 MiB + 1.16–1.31 × the setting. This line
    // lies above every peak measured (docs/design.md, "Memory").
    peakMemoryMiB: (settings) => 225 + 1.6 * Number(settings.FORGE_CACHE_MAX_MB),
    redis: 'cache',
  },
  'items-list': { config: ItemsListConfig, shutdownSeconds: 8, redis: 'durable' },
}
