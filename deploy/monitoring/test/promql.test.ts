import t from 'tap'
import { exposedBy } from '../src/exposition.ts'
import { queryProblems } from '../src/promql.ts'
import { ruleQueries } from '../src/rules.ts'

const page = `# HELP http_request_duration_seconds Time to answer
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.5",method="GET",route="/items/",status_code="200"} 1
http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/items/",status_code="200"} 1
http_request_duration_seconds_sum{method="GET",route="/items/",status_code="200"} 0.001
http_request_duration_seconds_count{method="GET",route="/items/",status_code="200"} 1
# TYPE items_store_up gauge
items_store_up 1
`
const other = `forge_cache_results_total{endpoint="users",result="a \\"quoted\\", {braced} value"} 3 1700000000000\n`
const exposed = exposedBy(page, other)

t.test('exposedBy reads each series name and its label names from the samples, pages merged', async (t) => {
  t.same(
    [...exposed].map(([name, labels]) => [name, [...labels].sort()]),
    [
      ['http_request_duration_seconds_bucket', ['le', 'method', 'route', 'status_code']],
      ['http_request_duration_seconds_sum', ['method', 'route', 'status_code']],
      ['http_request_duration_seconds_count', ['method', 'route', 'status_code']],
      ['items_store_up', []],
      ['forge_cache_results_total', ['endpoint', 'result']],
    ],
  )
})

t.test('a query naming only exposed metrics and their labels has no problems', async (t) => {
  t.same(queryProblems('histogram_quantile(0.99, sum by (job, route, le) (rate(http_request_duration_seconds_bucket{route=~"/items/.*", job=~"$job"}[$__rate_interval])))', exposed), [])
  t.same(queryProblems('sum by (instance) (items_store_up) / on(job) group_left() count(forge_cache_results_total{"result"="hit"})', exposed), [])
})

t.test('a metric no service exposes is a problem, a histogram named without its _bucket/_sum/_count suffix too', async (t) => {
  t.same(queryProblems('rate(up[5m])', exposed), ['up: no service exposes it'])
  t.same(queryProblems('http_request_duration_seconds{route="/items/"}', exposed), ['http_request_duration_seconds: no service exposes it'])
})

t.test('a label matcher the metric does not have is a problem, quoted or not; job and instance are on every series', async (t) => {
  t.same(queryProblems('items_store_up{route="/items/", job="items-list", instance="a"}', exposed), ['items_store_up: has no label route'])
  t.same(queryProblems('items_store_up{"status"="x"}', exposed), ['items_store_up: has no label status'])
  t.same(queryProblems('http_request_duration_seconds_count{le="1"}', exposed), ['http_request_duration_seconds_count: has no label le'])
})

t.test('a by, without, on, ignoring or group label missing from a metric selected under it is a problem', async (t) => {
  t.same(queryProblems('sum by (le) (rate(http_request_duration_seconds_count[5m]))', exposed), ['http_request_duration_seconds_count: has no label le (grouped by it)'])
  t.same(queryProblems('sum without ("route") (items_store_up)', exposed), ['items_store_up: has no label route (grouped by it)'])
  t.same(queryProblems('items_store_up * on(route) group_left(status_code) http_request_duration_seconds_count', exposed), [
    'items_store_up: has no label route (grouped by it)',
    'items_store_up: has no label status_code (grouped by it)',
  ])
  t.same(queryProblems('sum by (route) (http_request_duration_seconds_count) / ignoring(route) sum(items_store_up)', exposed), [
    'items_store_up: has no label route (grouped by it)',
  ], 'each grouping is checked against what it groups only')
})

t.test('a query that does not parse, or a selector without a metric name, is a problem', async (t) => {
  t.match(queryProblems('sum(rate(items_store_up[5m]) by', exposed), [/^does not parse at \d+: "items_store_up\[5m\]\) by"$/])
  t.same(queryProblems('{"items_store_up"}', exposed), ['{"items_store_up"}: a selector without a metric name'])
})

t.test('ruleQueries names each rule by its group and its alert or record name', async (t) => {
  t.same(
    ruleQueries([{ name: 'g', rules: [{ alert: 'A', expr: 'a' }, { record: 'job:b:sum', expr: 'sum(b)' }] }]),
    [
      { where: 'g / A', expr: 'a' },
      { where: 'g / job:b:sum', expr: 'sum(b)' },
    ],
  )
})
