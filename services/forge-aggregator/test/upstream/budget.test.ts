import t from 'tap'
import { RateLimitBudget, resourceOfPath } from '../../src/upstream/budget.ts'
import type { SharedStore } from '../../src/shared-cache/store.ts'

/** Whether a revalidation would be refused though the resource is not spent: below the reserve. */
function isBelowReserve(budget: RateLimitBudget): boolean {
  return budget.resumesAt('core') === undefined && budget.resumesAt('core', { revalidates: true }) !== undefined
}

function budgetOn(reserve = 0.1) {
  let clock = 1_700_000_000_000
  const changes: string[] = []
  const budget = new RateLimitBudget({ reserve, now: () => clock, onChange: (resource, state) => changes.push(`${resource}:${state.remaining}`) })
  return { budget, changes, now: () => clock, nowSeconds: () => Math.floor(clock / 1000), advance: (ms: number) => (clock += ms) }
}

t.test('searches count against the search resource, everything else against core', async (t) => {
  t.equal(resourceOfPath('/search/issues'), 'search')
  t.equal(resourceOfPath('/users/mona'), 'core')
})

t.test('the resource the upstream names wins over the path; resources this service does not spend are ignored', async (t) => {
  const { budget, changes, nowSeconds } = budgetOn()
  budget.record('core', { 'x-ratelimit-resource': 'search', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowSeconds() + 10) })
  t.ok(budget.resumesAt('search'))
  t.equal(budget.resumesAt('core'), undefined)
  budget.record('core', { 'x-ratelimit-resource': 'graphql', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowSeconds() + 10) })
  t.same(changes, ['search:0'])
})

t.test('an answer without rate-limit headers changes nothing', async (t) => {
  const { budget, changes } = budgetOn()
  budget.record('core', {})
  t.same(changes, [])
  t.equal(budget.resumesAt('core'), undefined)
  t.equal(isBelowReserve(budget), false)
})

t.test('remaining 0 blocks the resource until its reset, and no longer', async (t) => {
  const { budget, nowSeconds, advance } = budgetOn()
  const reset = nowSeconds() + 100
  budget.record('core', { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) })
  t.equal(budget.resumesAt('core'), reset * 1000)
  advance(100_000)
  t.equal(budget.resumesAt('core'), undefined)
})

t.test('a rate limit with Retry-After blocks the resource for that long even with calls left', async (t) => {
  const { budget, advance } = budgetOn()
  budget.record('core', { 'x-ratelimit-remaining': '4000' }, 30)
  t.ok(budget.resumesAt('core'))
  advance(30_001)
  t.equal(budget.resumesAt('core'), undefined)
})

t.test('below the reserve share of the limit, before the reset', async (t) => {
  const { budget, nowSeconds, advance } = budgetOn(0.1)
  const headers = (remaining: number) => ({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(nowSeconds() + 60) })
  budget.record('core', headers(500))
  t.equal(isBelowReserve(budget), false, '10% left is not below 10%')
  budget.record('core', headers(499))
  t.equal(isBelowReserve(budget), true)
  advance(60_000)
  t.equal(isBelowReserve(budget), false, 'the reset refills it')
})

/** A shared store that is only a map: enough to see what two budgets tell each other. */
function mapStore(): Pick<SharedStore, 'get' | 'set'> {
  const values = new Map<string, string>()
  return {
    get: async (entry, key) => {
      const value = values.get(key)
      return value === undefined ? undefined : entry.parse(value)
    },
    set: async (key, value) => void values.set(key, value),
  }
}

t.test('replicas share one budget: within one window the lower remaining wins, a later window replaces an earlier one', async (t) => {
  const clock = 1_700_000_000_000
  const shared = mapStore()
  const one = new RateLimitBudget({ reserve: 0.1, now: () => clock, store: shared })
  const two = new RateLimitBudget({ reserve: 0.1, now: () => clock, store: shared })
  const window = (remaining: number, resetIn: number) => ({
    'x-ratelimit-limit': '5000',
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(clock / 1000 + resetIn),
  })
  one.record('core', window(4000, 600))
  two.record('core', window(100, 600))
  await one.refresh()
  t.equal(isBelowReserve(one), true, 'one learned that two saw only 100 left')

  two.record('core', window(0, 600))
  one.record('core', window(4999, 1200))
  await two.refresh()
  t.equal(two.resumesAt('core'), undefined, 'a new window replaces the spent one')
  two.record('core', window(10, 600))
  await one.refresh()
  t.equal(isBelowReserve(one), false, 'an earlier window does not replace a later one')
})

t.test('a block learned by another replica is respected after refresh, and not before', async (t) => {
  const clock = 1_700_000_000_000
  const shared = mapStore()
  const one = new RateLimitBudget({ reserve: 0.1, now: () => clock, store: shared })
  const two = new RateLimitBudget({ reserve: 0.1, now: () => clock, store: shared })
  two.record('core', { 'x-ratelimit-remaining': '4000' }, 45)
  t.equal(one.resumesAt('core'), undefined, 'not yet refreshed')
  await one.refresh()
  t.equal(one.resumesAt('core'), clock + 45_000)
  t.equal(one.resumesAt('search'), clock + 45_000, 'a spent core stops searches too')
})

t.test('a stored budget that fails its schema is ignored', async (t) => {
  const clock = 1_700_000_000_000
  const shared = mapStore()
  const budget = new RateLimitBudget({ reserve: 0.1, now: () => clock, store: shared })
  await shared.set('budget:core', JSON.stringify({ limit: 60, remaining: 'none', resetAt: clock + 1, blockedUntil: clock + 60_000 }), 60_000)
  await budget.refresh()
  t.equal(budget.resumesAt('core'), undefined)
})

t.test('within one window, replicas keep the higher limit and the later block of the two', async (t) => {
  let clock = 1_700_000_000_000
  const shared = mapStore()
  const one = new RateLimitBudget({ reserve: 0.5, now: () => clock, store: shared })
  const two = new RateLimitBudget({ reserve: 0.5, now: () => clock, store: shared })
  const reset = String(clock / 1000 + 600)
  two.record('core', { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '40', 'x-ratelimit-reset': reset }, 10)
  // The store holds what was written last: one's budget, which two merges into its own.
  one.record('core', { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '40', 'x-ratelimit-reset': reset }, 30)
  await two.refresh()
  t.equal(two.resumesAt('core'), clock + 30_000, "one's later block")
  clock += 30_001
  t.equal(isBelowReserve(two), true, 'past the block, 40 left of the higher limit (5000) is below half of it')
})

t.test('a rate-limit header that is not a whole number is not read', async (t) => {
  const { budget } = budgetOn()
  for (const remaining of ['0x', 'x0', '-1', '1.5']) budget.record('core', { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': remaining, 'x-ratelimit-reset': '9999999999' })
  t.equal(budget.resumesAt('core'), undefined, 'no remaining was read as 0')
})
