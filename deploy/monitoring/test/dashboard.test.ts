import t from 'tap'
import { readFile } from 'node:fs/promises'
import { dashboardProblems, labelValuesQueries, panelQueries, panelsOf, type Dashboard, type Panel } from '../src/dashboard.ts'
import { DASHBOARD_PATH } from '../src/files.ts'

const dashboard = JSON.parse(await readFile(DASHBOARD_PATH, 'utf8')) as Dashboard

t.test('the dashboard has the rows docs/monitoring.md, "The dashboard" lists, each with panels', async (t) => {
  const rows = dashboard.panels.filter((panel) => panel.type === 'row').map((row) => row.title)
  t.same(rows, [
    'Requests, latency and errors per route',
    'Upstream budget and calls (forge-aggregator)',
    'Cache results (forge-aggregator)',
    'Redis health',
    'Replicas',
  ])
  t.notOk(dashboard.panels.at(-1)?.type === 'row', 'the last row is not empty')
  t.ok(dashboard.panels.every((panel, index) => panel.type !== 'row' || dashboard.panels[index + 1]?.type !== 'row'), 'no row is empty')
})

t.test('it imports into any Grafana: every query on the datasource variable, every panel described', async (t) => {
  t.same(dashboardProblems(dashboard), [])
  const ids = panelsOf(dashboard).map((panel) => panel.id)
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique')
  t.ok(panelQueries(dashboard).length > 0)
})

const panel = (extra: Partial<Panel> = {}): Panel => ({
  id: 1,
  type: 'timeseries',
  title: 'p',
  description: 'd',
  datasource: { type: 'prometheus', uid: '${datasource}' },
  targets: [{ refId: 'A', expr: 'x', datasource: { type: 'prometheus', uid: '${datasource}' } }],
  ...extra,
})
const datasource = { name: 'datasource', type: 'datasource', query: 'prometheus' }

t.test('dashboardProblems: a datasource of one Grafana, a missing variable, a panel without description, a query variable of another form', async (t) => {
  const fixed = { type: 'prometheus', uid: 'P1809F7CD0C75ACF3' }
  t.same(
    dashboardProblems({
      title: 'd',
      panels: [panel({ datasource: fixed, description: '' }), panel({ targets: [{ refId: 'B', expr: 'x', datasource: fixed }] })],
      templating: { list: [{ name: 'job', type: 'query', query: 'query_result(up)', datasource: fixed }] },
    }),
    [
      'no datasource variable for Prometheus',
      'p: no description',
      'p: datasource is not ${datasource}',
      'p / B: datasource is not ${datasource}',
      'variable job: datasource is not ${datasource}',
      'variable job: not a label_values(metric, label) query',
    ],
  )
})

t.test('panels inside collapsed rows are checked and queried too; rows need no datasource', async (t) => {
  const collapsed: Dashboard = {
    title: 'd',
    panels: [{ id: 1, type: 'row', title: 'r', panels: [panel({ id: 2, title: 'inner', description: '' })] }],
    templating: { list: [datasource] },
  }
  t.same(dashboardProblems(collapsed), ['inner: no description'])
  t.same(panelQueries(collapsed), [{ where: 'inner / A', expr: 'x' }])
})

t.test('a panel without queries (text) needs no datasource, only a description', async (t) => {
  const text: Panel = { id: 1, type: 'text', title: 'notes', description: 'what to read first' }
  t.same(dashboardProblems({ title: 'd', panels: [text], templating: { list: [datasource] } }), [])
})

t.test('label_values variables, written as a string or as a query object, give their metric and label', async (t) => {
  const templated = (query: string | { query: string }): Dashboard => ({ title: 'd', panels: [], templating: { list: [datasource, { name: 'v', type: 'query', query }] } })
  t.same(labelValuesQueries(templated('label_values(items_store_up, job)')), [{ where: 'variable v', metric: 'items_store_up', label: 'job' }])
  t.same(labelValuesQueries(templated({ query: 'label_values( a_total ,route )' })), [{ where: 'variable v', metric: 'a_total', label: 'route' }])
  t.same(labelValuesQueries(templated('label_values(job)')), [])
})
