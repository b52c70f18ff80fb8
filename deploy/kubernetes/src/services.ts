// By path, not as workspace dependencies: a package depending on the services would take part in
// building their production bundles (scripts/bundle-service.sh).
import { ForgeAggregatorConfig } from '../../../services/forge-aggregator/src/config.ts'
import { ItemsListConfig } from '../../../services/items-list/src/config.ts'
import type { ServiceDescription } from './checks.ts'

/**
 * The services the base deploys, each with the schema of the settings it reads: the same object
 * its server validates the environment with. Both give up on a graceful shutdown after 8 s
 * (@repo/service-kit).
 */
export const SERVICES: Readonly<Record<string, ServiceDescription>> = {
  'forge-aggregator': { config: ForgeAggregatorConfig, shutdownSeconds: 8 },
  'items-list': { config: ItemsListConfig, shutdownSeconds: 8 },
}
