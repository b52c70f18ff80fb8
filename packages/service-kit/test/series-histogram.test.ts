import t from 'tap'
import { Histogram, Registry } from 'prom-client'
import { SeriesHistogram, type HistogramSeries } from '../src/index.ts'

const BUCKETS = [0.01, 0.1, 1]
/** Below, on and between the bounds, and past the last one. */
const OBSERVATIONS: Array<[method: string, status: number, seconds: number]> = [
  ['GET', 200, 0.005],
  ['GET', 200, 0.01],
  ['GET', 200, 0.5],
  ['GET', 200, 7],
  ['POST', 201, 0.05],
  ['GET', 503, 1],
]

/** The text a scrape of `histogram`'s registry gives. */
async function scrape(make: (registry: Registry) => void): Promise<string> {
  const registry = new Registry()
  make(registry)
  return registry.metrics()
}

const configuration = (registry: Registry) => ({
  name: 'request_seconds',
  help: 'time to answer',
  labelNames: ['method', 'status_code'] as const,
  buckets: BUCKETS,
  registers: [registry],
})

t.test("a scrape reads the same text as prom-client's own Histogram given the same observations", async (t) => {
  const expected = await scrape((registry) => {
    const histogram = new Histogram(configuration(registry))
    for (const [method, status, seconds] of OBSERVATIONS) histogram.observe({ method, status_code: status }, seconds)
  })
  const actual = await scrape((registry) => {
    const histogram = new SeriesHistogram(configuration(registry))
    const bound = new Map<string, HistogramSeries>()
    for (const [method, status, seconds] of OBSERVATIONS) {
      const key = `${method} ${status}`
      if (!bound.has(key)) bound.set(key, histogram.series({ method, status_code: status }))
      bound.get(key)!.observe(seconds)
    }
  })
  t.equal(actual, expected)
  t.match(actual, /request_seconds_bucket\{le="0\.01",method="GET",status_code="200"\} 2\n/, 'an observation on a bound counts in that bound')
})

t.test('bounds given out of order count as sorted', async (t) => {
  const text = await scrape((registry) => {
    const histogram = new SeriesHistogram({ ...configuration(registry), buckets: [1, 0.01, 0.1] })
    histogram.series({ method: 'GET', status_code: 200 }).observe(0.05)
  })
  t.match(text, /le="0\.01",method="GET",status_code="200"\} 0\n.*le="0\.1",method="GET",status_code="200"\} 1\n/s)
})

t.test("the labels a series was made with are its own: the caller's object can change afterwards", async (t) => {
  const text = await scrape((registry) => {
    const histogram = new SeriesHistogram(configuration(registry))
    const labels = { method: 'GET', status_code: 200 }
    histogram.series(labels).observe(0.5)
    labels.method = 'PUT'
  })
  t.match(text, /request_seconds_count\{method="GET",status_code="200"\} 1/)
  t.notMatch(text, /PUT/)
})

t.test("series observed through prom-client's own methods are scraped beside the bound ones", async (t) => {
  const text = await scrape((registry) => {
    const histogram = new SeriesHistogram(configuration(registry))
    histogram.observe({ method: 'DELETE', status_code: 404 }, 0.02)
    histogram.series({ method: 'GET', status_code: 200 }).observe(0.02)
  })
  t.match(text, /request_seconds_count\{method="DELETE",status_code="404"\} 1/)
  t.match(text, /request_seconds_count\{method="GET",status_code="200"\} 1/)
})

t.test("reset empties every series: prom-client's are forgotten, the bound ones shown empty and counting again", async (t) => {
  const registry = new Registry()
  const histogram = new SeriesHistogram(configuration(registry))
  const bound = histogram.series({ method: 'GET', status_code: 200 })
  bound.observe(0.5)
  histogram.observe({ method: 'DELETE', status_code: 404 }, 0.02)
  histogram.reset()
  const afterReset = await registry.metrics()
  t.notMatch(afterReset, /DELETE/)
  t.match(afterReset, /request_seconds_count\{method="GET",status_code="200"\} 0\n/)
  t.match(afterReset, /request_seconds_sum\{method="GET",status_code="200"\} 0\n/)
  t.match(afterReset, /request_seconds_bucket\{le="1",method="GET",status_code="200"\} 0\n/)
  bound.observe(0.05)
  t.match(await registry.metrics(), /request_seconds_bucket\{le="0\.1",method="GET",status_code="200"\} 1\n/)
})

t.test('a bound series is shown, empty, before its first observation', async (t) => {
  const text = await scrape((registry) => {
    new SeriesHistogram(configuration(registry)).series({ method: 'GET', status_code: 200 })
  })
  t.match(text, /request_seconds_bucket\{le="\+Inf",method="GET",status_code="200"\} 0\n/)
  t.match(text, /request_seconds_count\{method="GET",status_code="200"\} 0\n/)
})
