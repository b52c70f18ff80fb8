import t from 'tap'
import { Counter, Registry } from 'prom-client'
import { SeriesCounter } from '../src/index.ts'

const configuration = (registry: Registry) => ({
  name: 'answers_total',
  help: 'answers by result',
  labelNames: ['endpoint', 'result'] as const,
  registers: [registry],
})

t.test("a scrape reads the same text as prom-client's own Counter given the same counts", async (t) => {
  const expectedRegistry = new Registry()
  const expected = new Counter(configuration(expectedRegistry))
  expected.inc({ endpoint: 'users', result: 'hit' }, 3)
  expected.inc({ endpoint: 'users', result: 'miss' }, 0)
  expected.inc({ endpoint: 'repos', result: 'hit' }, 1)

  const actualRegistry = new Registry()
  const actual = new SeriesCounter(configuration(actualRegistry))
  const usersHit = actual.series({ endpoint: 'users', result: 'hit' })
  actual.series({ endpoint: 'users', result: 'miss' })
  const reposHit = actual.series({ endpoint: 'repos', result: 'hit' })
  usersHit.inc()
  usersHit.inc()
  reposHit.inc()
  usersHit.inc()
  t.equal(await actualRegistry.metrics(), await expectedRegistry.metrics())
})

t.test('a bound series is shown at 0 before anything is counted in it', async (t) => {
  const registry = new Registry()
  new SeriesCounter(configuration(registry)).series({ endpoint: 'users', result: 'stale' })
  t.match(await registry.metrics(), 'answers_total{endpoint="users",result="stale"} 0')
})

t.test('what was counted between two reads is added once', async (t) => {
  const registry = new Registry()
  const counter = new SeriesCounter(configuration(registry))
  const hits = counter.series({ endpoint: 'users', result: 'hit' })
  hits.inc()
  hits.inc()
  t.equal((await counter.get()).values[0]?.value, 2)
  t.equal((await counter.get()).values[0]?.value, 2, 'reading again adds nothing')
  hits.inc()
  t.match(await registry.metrics(), 'answers_total{endpoint="users",result="hit"} 3')
})

t.test('reset() puts every series back to 0, still shown, and counting starts again from there', async (t) => {
  const registry = new Registry()
  const counter = new SeriesCounter(configuration(registry))
  const hits = counter.series({ endpoint: 'users', result: 'hit' })
  hits.inc()
  await counter.get()
  hits.inc()
  registry.resetMetrics()
  t.match(await registry.metrics(), 'answers_total{endpoint="users",result="hit"} 0')
  hits.inc()
  t.match(await registry.metrics(), 'answers_total{endpoint="users",result="hit"} 1')
})

t.test("prom-client's inc() still counts label sets beside the bound series", async (t) => {
  const registry = new Registry()
  const counter = new SeriesCounter(configuration(registry))
  counter.series({ endpoint: 'users', result: 'hit' }).inc()
  counter.inc({ endpoint: 'repos', result: 'miss' }, 2)
  const text = await registry.metrics()
  t.match(text, 'answers_total{endpoint="users",result="hit"} 1')
  t.match(text, 'answers_total{endpoint="repos",result="miss"} 2')
})
