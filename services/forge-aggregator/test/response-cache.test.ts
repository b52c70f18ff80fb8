import t from 'tap'
import { ResponseCache } from '../src/response-cache.ts'

function cacheOn(options: { ttlSeconds: number; maxBytes: number }) {
  let clock = 1_000_000
  const cache = new ResponseCache({ ...options, now: () => clock })
  return { cache, advance: (ms: number) => (clock += ms) }
}

const produced = (body: string, partial: string[] = []) => async () => ({ body, partial })

t.test('an answer is kept for the TTL, then produced again', async (t) => {
  const { cache, advance } = cacheOn({ ttlSeconds: 10, maxBytes: 1_000 })
  let productions = 0
  const produce = async () => ({ body: `answer ${++productions}`, partial: [] })
  t.equal((await cache.get('k', produce)).body, 'answer 1')
  advance(10_000)
  t.equal((await cache.get('k', produce)).body, 'answer 1', 'still fresh at exactly the TTL')
  advance(1)
  t.equal((await cache.get('k', produce)).body, 'answer 2')
})

t.test('memory is bounded: past maxBytes the least recently used answers are dropped', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 60, maxBytes: 250 })
  for (const key of ['a', 'b', 'c']) await cache.get(key, produced(key.repeat(100)))
  let reproduced = false
  await cache.get('a', async () => ((reproduced = true), { body: 'a'.repeat(100), partial: [] }))
  t.ok(reproduced, 'the oldest answer was dropped to stay within 250 bytes')
  let kept = true
  await cache.get('c', async () => ((kept = false), { body: 'c', partial: [] }))
  t.ok(kept, 'the newest is still there')
})

t.test('an answer larger than the whole budget is served but not kept', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 60, maxBytes: 10 })
  t.equal((await cache.get('big', produced('x'.repeat(50)))).body, 'x'.repeat(50))
  t.equal((await cache.get('big', produced('again'))).body, 'again')
})

t.test('concurrent gets of one key share one production', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 60, maxBytes: 1_000 })
  let productions = 0
  const slow = async () => {
    productions += 1
    await new Promise((resolve) => setTimeout(resolve, 20))
    return { body: 'shared', partial: [] }
  }
  const answers = await Promise.all(Array.from({ length: 50 }, () => cache.get('k', slow)))
  t.equal(productions, 1)
  t.ok(answers.every((answer) => answer === answers[0]))
})

t.test('with TTL 0 nothing is kept, but concurrent gets still share one production', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 0, maxBytes: 1_000 })
  let productions = 0
  const produce = async () => ({ body: `answer ${++productions}`, partial: [] })
  await Promise.all([cache.get('k', produce), cache.get('k', produce)])
  t.equal(productions, 1)
  await cache.get('k', produce)
  t.equal(productions, 2)
})

t.test('partial answers and failures are not kept', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 60, maxBytes: 1_000 })
  await cache.get('p', produced('partial', ['totalPRs']))
  t.equal((await cache.get('p', produced('complete'))).body, 'complete')
  await t.rejects(cache.get('f', async () => Promise.reject(new Error('upstream down'))))
  t.equal((await cache.get('f', produced('recovered'))).body, 'recovered')
})

t.test('secondsLeft counts down whole seconds to the expiry and never below 0', async (t) => {
  const { cache, advance } = cacheOn({ ttlSeconds: 60, maxBytes: 1_000 })
  const answer = await cache.get('k', produced('x'))
  t.equal(cache.secondsLeft(answer), 60)
  advance(30_500)
  t.equal(cache.secondsLeft(answer), 29)
  advance(60_000)
  t.equal(cache.secondsLeft(answer), 0)
})

t.test('the ETag is a strong validator that changes with the body', async (t) => {
  const { cache } = cacheOn({ ttlSeconds: 0, maxBytes: 1_000 })
  const one = await cache.get('a', produced('{"v":1}'))
  const same = await cache.get('b', produced('{"v":1}'))
  const other = await cache.get('c', produced('{"v":2}'))
  t.match(one.etag, /^"[^"]+"$/)
  t.equal(one.etag, same.etag)
  t.not(one.etag, other.etag)
})

t.test('without a clock of its own the cache uses the monotonic clock', async (t) => {
  const cache = new ResponseCache({ ttlSeconds: 60, maxBytes: 1_000 })
  const answer = await cache.get('k', produced('x'))
  t.equal((await cache.get('k', produced('y'))).body, 'x')
  t.ok(cache.secondsLeft(answer) >= 59)
})
