import t from 'tap'
import { RateLimitBudget, resourceOfPath } from '../src/rate-limit-budget.ts'
import type { SharedStore } from '../src/shared-store.ts'

function budgetOn(reserve = 0.1) {
  let clock = 1_700_000_000_000
  const changes: string[] = []
  const budget = new RateLimitBudget({ reserve, now: () => clock, onChange: (resource, state) => changes.push(`${resource}:${state.remaining}`) })
  return { budget, changes, nowSeconds: () => Math.floor(clock / 1000), advance: (ms: number) => (clock += ms) }
}

t.test('searches count against the search resource, everything else against core', async (t) => {
  t.equal(resourceOfPath('/search/issues'), 'search')
  t.equal(resourceOfPath('/users/mona'), 'core')
})

t.test('the resource the upstream names wins over the path; resources this service does not spend are ignored', async (t) => {
  const { budget, changes, nowSeconds } = budgetOn()
  budget.record('/users/mona', { 'x-ratelimit-resource': 'search', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowSeconds() + 10) })
  t.ok(budget.blockedUntil('search'))
  t.equal(budget.blockedUntil('core'), undefined)
  budget.record('/graphql', { 'x-ratelimit-resource': 'graphql', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowSeconds() + 10) })
  t.same(changes, ['search:0'])
})

t.test('an answer without rate-limit headers changes nothing', async (t) => {
  const { budget, changes } = budgetOn()
  budget.record('/users/mona', {})
  t.same(changes, [])
  t.equal(budget.blockedUntil('core'), undefined)
  t.equal(budget.isBelowReserve(), false)
})

t.test('remaining 0 blocks the resource until its reset, and no longer', async (t) => {
  const { budget, nowSeconds, advance } = budgetOn()
  const reset = nowSeconds() + 100
  budget.record('/users/mona', { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) })
  t.equal(budget.blockedUntil('core'), reset * 1000)
  advance(100_000)
  t.equal(budget.blockedUntil('core'), undefined)
})

t.test('a rate limit with Retry-After blocks the resource for that long even with calls left', async (t) => {
  const { budget, advance } = budgetOn()
  budget.record('/users/mona', { 'x-ratelimit-remaining': '4000' }, 30)
  t.ok(budget.blockedUntil('core'))
  advance(30_001)
  t.equal(budget.blockedUntil('core'), undefined)
})

t.test('below the reserve share of the limit, before the reset', async (t) => {
  const { budget, nowSeconds, advance } = budgetOn(0.1)
  const headers = (remaining: number) => ({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(nowSeconds() + 60) })
  budget.record('/users/mona', headers(500))
  t.equal(budget.isBelowReserve(), false, '10% left is not below 10%')
  budget.record('/users/mona', headers(499))
  t.equal(budget.isBelowReserve(), true)
  advance(60_000)
  t.equal(budget.isBelowReserve(), false, 'the reset refills it')
})

/** A shared store that is only a map: enough to see what two budgets tell each other. */
function mapStore(): Pick<SharedStore, 'get' | 'set'> {
  const values = new Map<string, string>()
  return {
    get: async (key) => values.get(key),
    set: async (key, value) => void values.set(key, value),
  }
}

t.test('replicas share one budget: within one window the lower remaining wins, a later window replaces an earlier one', async (t) => {
  const clock = 1_700_000_000_000
  const shared = mapStore()
  const one = new RateLimitBudget({ reserve: 0.1, now: () => clock, shared })
  const two = new RateLimitBudget({ reserve: 0.1, now: () => clock, shared })
  const window = (remaining: number, resetIn: number) => ({
    'x-ratelimit-limit': '5000',
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(clock / 1000 + resetIn),
  })
  one.record('/users/a', window(4000, 600))
  two.record('/users/b', window(100, 600))
  await one.refresh()
  t.equal(one.isBelowReserve(), true, 'one learned that two saw only 100 left')

  two.record('/users/b', window(0, 600))
  one.record('/users/a', window(4999, 1200))
  await two.refresh()
  t.equal(two.blockedUntil('core'), undefined, 'a new window replaces the spent one')
  two.record('/users/b', window(10, 600))
  await one.refresh()
  t.equal(one.isBelowReserve(), false, 'an earlier window does not replace a later one')
})

t.test('without a shared store there is nothing to refresh from', async (t) => {
  const { budget } = budgetOn()
  await budget.refresh()
  t.equal(budget.blockedUntil('core'), undefined)
})
