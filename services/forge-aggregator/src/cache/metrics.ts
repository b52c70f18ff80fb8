import type { Registry } from 'prom-client'
import { SeriesCounter, type CounterSeries } from '@repo/service-kit'
import type { CacheResult, Endpoint } from './response-cache.ts'

const ENDPOINTS: readonly Endpoint[] = ['users', 'repos']
const RESULTS: readonly CacheResult[] = ['hit', 'miss', 'collapsed', 'revalidated', 'stale']

/**
 * Registers `forge_cache_results_total` on `registry` and returns the function that counts one
 * answer. Every series exists from the start (at 0), and each is bound once (`SeriesCounter`): a
 * cache hit costs one addition, not a label lookup.
 */
export function createCacheResultCounter(registry: Registry): (endpoint: Endpoint, result: CacheResult) => void {
  const results = new SeriesCounter({
    name: 'forge_cache_results_total',
    help: 'Answers by endpoint and how the cache obtained them',
    labelNames: ['endpoint', 'result'] as const,
    registers: [registry],
  })
  const series = Object.fromEntries(
    ENDPOINTS.map((endpoint) => [endpoint, Object.fromEntries(RESULTS.map((result) => [result, results.series({ endpoint, result })]))]),
  ) as Record<Endpoint, Record<CacheResult, CounterSeries>>
  return (endpoint, result) => series[endpoint][result].inc()
}
