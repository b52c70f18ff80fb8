import { Counter, type Registry } from 'prom-client'
import type { CacheResult, Endpoint } from './response-cache.ts'

/**
 * The response cache's metric: how each answer was obtained (docs/monitoring.md, "Metrics").
 */

const ENDPOINTS: readonly Endpoint[] = ['users', 'repos']
const RESULTS: readonly CacheResult[] = ['hit', 'miss', 'collapsed', 'revalidated', 'stale']

/**
 * Registers `forge_cache_results_total` on `registry` and returns the function that counts one
 * answer. Every series exists from the start (at 0), so a scrape shows zeros rather than nothing.
 */
export function createCacheResultCounter(registry: Registry): (endpoint: Endpoint, result: CacheResult) => void {
  const results = new Counter({
    name: 'forge_cache_results_total',
    help: 'Answers by endpoint and how the cache obtained them',
    labelNames: ['endpoint', 'result'] as const,
    registers: [registry],
  })
  for (const endpoint of ENDPOINTS) for (const result of RESULTS) results.inc({ endpoint, result }, 0)
  return (endpoint, result) => results.inc({ endpoint, result })
}
