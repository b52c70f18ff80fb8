import t, { type Test } from 'tap'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { pino } from 'pino'
import { ResponseCache, type Produce } from '../../src/cache/response-cache.ts'
import type { ProductionLock } from '../../src/shared-cache/lock.ts'
import type { SharedStore } from '../../src/shared-cache/store.ts'
import { BudgetSpent, UpstreamFailure, UpstreamNotFound, UpstreamRateLimited } from '../../src/upstream/errors.ts'

const log = pino({ level: 'silent' })
const REQUEST = { endpoint: 'users', log } as const

function cacheOn(options: { ttlSeconds: number; maxBytes?: number; staleSeconds?: number; store?: SharedStore; lock?: ProductionLock }) {
  let clock = 1_700_000_000_000
  const now = () => clock
  const results: string[] = []
  const cache = new ResponseCache({
    ttlSeconds: options.ttlSeconds,
    staleSeconds: options.staleSeconds ?? 3_600,
    maxBytes: options.maxBytes ?? 1_000,
    now,
    store: options.store,
    lock: options.lock,
    onResult: (endpoint, result) => results.push(`${endpoint}:${result}`),
  })
  const get = async (key: string, produce: Produce, request: typeof REQUEST = REQUEST) => cache.get(key, produce, request)
  return { cache, get, results, now, advance: (ms: number) => (clock += ms) }
}

/** Another replica's view of Redis: a shared store in memory that records what it is asked. */
function memoryStore() {
  const values = new Map<string, string>()
  const calls: string[] = []
  const store: SharedStore = {
    async get(entry, key) {
      calls.push(`get ${key}`)
      const text = values.get(key)
      return text === undefined ? undefined : entry.parse(text)
    },
    async set(key, value, ttlMs) {
      calls.push(`set ${key} ${ttlMs}`)
      values.set(key, value)
    },
    delete(key) {
      calls.push(`delete ${key}`)
      values.delete(key)
    },
    read(entry, key) {
      return store.get(entry, key)
    },
    write(key, value, ttlMs) {
      return store.set(key, value, ttlMs)
    },
  }
  return { store, calls }
}

const produced = (body: string, partial: string[] = [], partialUntil?: number) => async () => ({ body, partial, isPrivate: false, partialUntil })
const failing = (error: Error) => () => Promise.reject(error)

t.test('an answer is kept for the TTL, then produced again', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 10 })
  let productions = 0
  const produce = async () => ({ body: `answer ${++productions}`, partial: [], isPrivate: false })
  t.equal((await get('k', produce)).answer.body, 'answer 1')
  advance(10_000)
  t.equal((await get('k', produce)).answer.body, 'answer 1', 'still fresh at exactly the TTL')
  advance(1)
  const again = await get('k', produce)
  t.equal(again.answer.body, 'answer 2')
  t.equal(again.result, 'revalidated', 'produced again over a kept answer')
})

t.test('each request is counted by how it was answered', async (t) => {
  const { get, results, advance } = cacheOn({ ttlSeconds: 10 })
  await get('k', produced('a'))
  await get('k', produced('b'))
  advance(10_001)
  await get('k', produced('c'))
  t.same(results, ['users:miss', 'users:hit', 'users:revalidated'])
})

t.test('memory is bounded: past maxBytes the least recently used answers are dropped', async (t) => {
  const { get } = cacheOn({ ttlSeconds: 60, maxBytes: 250 })
  for (const key of ['a', 'b', 'c']) await get(key, produced(key.repeat(100)))
  let reproduced = false
  await get('a', async () => ((reproduced = true), { body: 'a'.repeat(100), partial: [], isPrivate: false }))
  t.ok(reproduced, 'the oldest answer was dropped to stay within 250 bytes')
  let kept = true
  await get('c', async () => ((kept = false), { body: 'c', partial: [], isPrivate: false }))
  t.ok(kept, 'the newest is still there')
})

t.test('an answer larger than the whole budget is served but not kept', async (t) => {
  const { get } = cacheOn({ ttlSeconds: 60, maxBytes: 10 })
  t.equal((await get('big', produced('x'.repeat(50)))).answer.body, 'x'.repeat(50))
  t.equal((await get('big', produced('again'))).answer.body, 'again')
})

t.test('concurrent gets of one key share one production, the others counted as collapsed', async (t) => {
  const { get, results } = cacheOn({ ttlSeconds: 60 })
  let productions = 0
  const slow = async () => {
    productions += 1
    await new Promise((resolve) => setImmediate(resolve))
    return { body: 'shared', partial: [], isPrivate: false }
  }
  const answers = await Promise.all(Array.from({ length: 50 }, () => get('k', slow)))
  t.equal(productions, 1)
  t.ok(answers.every((answer) => answer.answer === answers[0]!.answer))
  t.equal(answers.filter((answer) => answer.result === 'collapsed').length, 49)
  t.equal(results.filter((result) => result === 'users:collapsed').length, 49)
})

t.test('with TTL 0 nothing is answered fresh, but concurrent gets still share one production', async (t) => {
  const { get } = cacheOn({ ttlSeconds: 0 })
  let productions = 0
  const produce = async () => ({ body: `answer ${++productions}`, partial: [], isPrivate: false })
  await Promise.all([get('k', produce), get('k', produce)])
  t.equal(productions, 1)
  await get('k', produce)
  t.equal(productions, 2)
})

t.test('partial answers whose searches failed for a reason other than the budget are not kept, nor are failures', async (t) => {
  const { get } = cacheOn({ ttlSeconds: 60 })
  const partial = await get('p', produced('partial', ['totalPRs']))
  t.equal(partial.stored, false)
  t.equal((await get('p', produced('complete'))).answer.body, 'complete')
  await t.rejects(get('f', failing(new UpstreamFailure('upstream down'))))
  t.equal((await get('f', produced('recovered'))).answer.body, 'recovered')
})

t.test('a partial answer is kept until its missing counts may be asked again, at most the TTL', async (t) => {
  const { get, advance, now } = cacheOn({ ttlSeconds: 60 })
  const first = await get('p', produced('partial', ['totalIssues'], now() + 20_000))
  t.equal(first.stored, true)
  advance(19_000)
  const reused = await get('p', produced('should not be asked'))
  t.equal(reused.answer.body, 'partial')
  t.equal(reused.result, 'hit')
  advance(1_001)
  t.equal((await get('p', produced('complete'))).answer.body, 'complete', 'asked again once the search budget reset')
  const long = await get('q', produced('partial', ['totalPRs'], now() + 3_600_000))
  t.equal(long.answer.freshUntil, now() + 60_000, 'never longer than the TTL')
})

t.test('stale-if-error: a failure other than 404 sends the last answer, within TTL + staleSeconds', async (t) => {
  const { get, advance, cache } = cacheOn({ ttlSeconds: 60, staleSeconds: 100 })
  await get('k', produced('last good'))
  advance(60_001)
  const stale = await get('k', failing(new UpstreamFailure('Upstream responded 502: Bad Gateway', 502)))
  t.equal(stale.answer.body, 'last good')
  t.equal(stale.result, 'stale')
  t.equal(stale.staleBecause, 'stale-if-error')
  t.equal(stale.failedStatus, 502)
  t.equal(cache.ageOf(stale.answer), 60)
  advance(100_000)
  await t.rejects(get('k', failing(new UpstreamFailure('down'))), 'past TTL + staleSeconds nothing is left to send')
})

t.test('stale-if-error covers rate limits, timeouts and connection errors alike', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('last good'))
  advance(60_001)
  const limited = await get('k', failing(new UpstreamRateLimited('Upstream responded 429', 60, 429)))
  t.equal(limited.failedStatus, 429)
  const timedOut = await get('k', failing(new UpstreamFailure('Upstream did not answer within 10 ms')))
  t.equal(timedOut.result, 'stale')
  t.equal(timedOut.failedStatus, undefined, 'no upstream status to name')
})

t.test('a call the budget stopped mid-production sends the stale answer as a budget one', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('last good'))
  advance(60_001)
  const stale = await get('k', failing(BudgetSpent.until(Date.now() + 5_000, Date.now())))
  t.equal(stale.staleBecause, 'budget')
})

t.test('a 404 drops the stale answer and is answered 404', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('used to exist'))
  advance(60_001)
  await t.rejects(get('k', failing(new UpstreamNotFound('gone', 404))), UpstreamNotFound)
  await t.rejects(get('k', failing(new UpstreamFailure('down', 502))), UpstreamFailure, 'nothing stale is left after the 404')
})

t.test('a fault of our own is not covered by a stale answer', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('last good'))
  advance(60_001)
  await t.rejects(get('k', failing(new TypeError('bug'))), TypeError)
})

t.test('FORGE_STALE_SECONDS=0 never sends a stale answer', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60, staleSeconds: 0 })
  await get('k', produced('last good'))
  advance(60_001)
  await t.rejects(get('k', failing(new UpstreamFailure('down', 502))))
})

t.test('a production the budget refused answers a known key stale (budget) and an unknown key BudgetSpent', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('known', produced('known answer'))
  advance(60_001)
  const refused = failing(BudgetSpent.until(Date.now() + 30_000, Date.now()))
  const known = await get('known', refused)
  t.equal(known.result, 'stale')
  t.equal(known.staleBecause, 'budget')
  const error = await get('unknown', refused).catch((caught: unknown) => caught)
  t.match(error, { name: 'BudgetSpent', retryAfterSeconds: 30 })
})

t.test("a production is given its request's logger, and told whether it revalidates an answer that could still be sent stale", async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  const told: boolean[] = []
  const produce: Produce = async (context) => {
    t.equal(context.log, log, "the request's own logger")
    told.push(context.revalidates)
    return { body: 'x', partial: [], isPrivate: false }
  }
  await get('k', produce)
  advance(60_001)
  await get('k', produce)
  t.same(told, [false, true])
})

t.test('secondsLeft counts down whole seconds to the expiry and never below 0', async (t) => {
  const { get, cache, advance } = cacheOn({ ttlSeconds: 60 })
  const { answer } = await get('k', produced('x'))
  t.equal(cache.secondsLeft(answer), 60)
  advance(30_500)
  t.equal(cache.secondsLeft(answer), 29)
  advance(60_000)
  t.equal(cache.secondsLeft(answer), 0)
})

t.test('the ETag is a strong validator that changes with the body', async (t) => {
  const { get } = cacheOn({ ttlSeconds: 0 })
  const one = (await get('a', produced('{"v":1}'))).answer
  const same = (await get('b', produced('{"v":1}'))).answer
  const other = (await get('c', produced('{"v":2}'))).answer
  t.match(one.etag, /^"[^"]+"$/)
  t.equal(one.etag, same.etag)
  t.not(one.etag, other.etag)
})

t.test('concurrent gets past the TTL share one revalidation, the others counted as collapsed', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('first'))
  advance(60_001)
  const slow: Produce = async () => (await nextTurn(), { body: 'second', partial: [], isPrivate: false })
  const answers = await Promise.all(Array.from({ length: 5 }, () => get('k', slow)))
  t.same(answers.map((answer) => answer.result).sort(), ['collapsed', 'collapsed', 'collapsed', 'collapsed', 'revalidated'])
  t.ok(answers.every((answer) => answer.answer.body === 'second'))
})

t.test('concurrent gets that end stale are all answered stale, none as collapsed', async (t) => {
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('last good'))
  advance(60_001)
  const down: Produce = async () => {
    await nextTurn()
    throw new UpstreamFailure('Upstream responded 502: Bad Gateway', 502)
  }
  const answers = await Promise.all(Array.from({ length: 5 }, () => get('k', down)))
  t.same(new Set(answers.map((answer) => `${answer.result} ${answer.staleBecause}`)), new Set(['stale stale-if-error']))
})

t.test('a stale answer is logged as a warning with its age and the failure, under err', async (t) => {
  const lines: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) })
  const { get, advance } = cacheOn({ ttlSeconds: 60 })
  await get('k', produced('last good'))
  advance(60_001)
  await get('k', failing(new UpstreamFailure('Upstream responded 502: Bad Gateway', 502)), { endpoint: 'users', log: logger })
  t.match(lines, [{ level: 40, msg: 'answering stale (stale-if-error)', ageSeconds: 60, err: { type: 'UpstreamFailure', message: 'Upstream responded 502: Bad Gateway' } }])
})

/** Whether `cache` answers `k` at once, from its own memory, without asking the shared store. */
function isAnsweredFromMemory(t: Test, cache: ResponseCache, shared: ReturnType<typeof memoryStore>): void {
  shared.calls.length = 0
  const again = cache.get('k', produced('not asked'), REQUEST)
  t.notOk(again instanceof Promise, 'answered at once, from memory')
  t.same(shared.calls, [], 'the shared store not asked')
}

t.test("an answer read from another replica's store is kept here: the next get is a hit from memory, Redis not asked", async (t) => {
  const shared = memoryStore()
  await cacheOn({ ttlSeconds: 60, store: shared.store }).get('k', produced('theirs'))
  const here = cacheOn({ ttlSeconds: 60, store: shared.store })
  const read = await here.get('k', produced('not asked'))
  t.match(read, { result: 'hit', answer: { body: 'theirs' } })
  isAnsweredFromMemory(t, here.cache, shared)
})

t.test("a get that waited on another replica's production keeps its answer here: the next get is a hit from memory", async (t) => {
  const shared = memoryStore()
  let release = () => {}
  const lock: ProductionLock = { claim: async () => ({ kind: 'theirs', released: new Promise<void>((resolve) => (release = resolve)) }), close: async () => {} }
  const here = cacheOn({ ttlSeconds: 60, store: shared.store, lock })
  const waiting = here.get('k', produced('not asked'))
  await cacheOn({ ttlSeconds: 60, store: shared.store }).get('k', produced('theirs'))
  release()
  t.match(await waiting, { result: 'collapsed', answer: { body: 'theirs' } })
  isAnsweredFromMemory(t, here.cache, shared)
})

t.test('an answer is shared for as long as it may be sent: the TTL plus staleSeconds', async (t) => {
  const shared = memoryStore()
  const { get } = cacheOn({ ttlSeconds: 60, staleSeconds: 100, store: shared.store })
  await get('k', produced('x'))
  t.same(shared.calls, ['get answer:k', 'set answer:k 160000'])
})

t.test('a partial answer that may not be reused is not written to the shared store either', async (t) => {
  const shared = memoryStore()
  const { get, now } = cacheOn({ ttlSeconds: 60, store: shared.store })
  await get('p', produced('partial', ['totalPRs']))
  await get('q', produced('partial', ['totalIssues'], now()))
  t.same(shared.calls, ['get answer:p', 'get answer:q'])
})
