import t from 'tap'
import { readFile } from 'node:fs/promises'
import { labelValuesQueries, panelQueries, type Dashboard } from '../src/dashboard.ts'
import { exposedBy } from '../src/exposition.ts'
import { ALERTS_PATH, DASHBOARD_PATH } from '../src/files.ts'
import { queryProblems, TARGET_LABELS } from '../src/promql.ts'
import { metricsFindings, whyNoPromtool } from '../src/promtool.ts'
import { ruleGroupsOf, ruleQueries } from '../src/rules.ts'
import { scrapeServices } from './helpers/services.ts'

/**
 * `promtool check metrics` findings on prom-client's default Node.js metrics, which the services
 * do not name (`collectDefaultMetrics`): gauges that prom-client ends in `_total`. Waived here,
 * one by one, so that any other finding fails.
 */
const WAIVED_FINDINGS = [
  'nodejs_active_handles_total non-counter metrics should not have "_total" suffix',
  'nodejs_active_requests_total non-counter metrics should not have "_total" suffix',
  'nodejs_active_resources_total non-counter metrics should not have "_total" suffix',
]

// Both services, run from their sources with every labelled series made to exist, scraped once.
const pages = await scrapeServices(t)
const exposed = exposedBy(...Object.values(pages))
const noPromtool = await whyNoPromtool()

for (const [service, page] of Object.entries(pages)) {
  t.test(`${service}'s own metrics lint clean with promtool check metrics (prom-client's defaults waived)`, { skip: noPromtool }, async (t) => {
    const findings = await metricsFindings(page)
    t.same(findings.filter((finding) => !WAIVED_FINDINGS.includes(finding)), [])
    for (const finding of findings.filter((each) => WAIVED_FINDINGS.includes(each))) t.comment(`waived: ${finding}`)
  })
}

t.test('every alert names only metrics the services expose, with labels they have', async (t) => {
  const queries = ruleQueries(ruleGroupsOf(await readFile(ALERTS_PATH, 'utf8')))
  t.ok(queries.length > 0)
  for (const { where, expr } of queries) t.same(queryProblems(expr, exposed), [], where)
})

t.test('every dashboard panel and variable names only metrics the services expose, with labels they have', async (t) => {
  const dashboard = JSON.parse(await readFile(DASHBOARD_PATH, 'utf8')) as Dashboard
  for (const { where, expr } of panelQueries(dashboard)) t.same(queryProblems(expr, exposed), [], where)
  for (const { where, metric, label } of labelValuesQueries(dashboard)) {
    t.ok(exposed.has(metric) && (TARGET_LABELS.has(label) || exposed.get(metric)?.has(label)), `${where}: ${metric} with ${label}`)
  }
})

t.test('the scrape holds what the rules depend on: the budget, its reserve, both stores, the webhook outcomes and every route', async (t) => {
  t.same(exposed.get('forge_ratelimit_reserve_ratio'), new Set(['resource']))
  t.same(exposed.get('forge_ratelimit_limit'), new Set(['resource']))
  t.ok(exposed.has('items_store_up') && exposed.has('forge_shared_store_up'))
  t.same(exposed.get('forge_webhook_deliveries_total'), new Set(['event', 'outcome']))
  const outcomes = new Set([...pages['forge-aggregator'].matchAll(/^forge_webhook_deliveries_total\{[^}]*outcome="([^"]+)"/gm)].map((match) => match[1]))
  for (const outcome of ['bad_signature', 'failed']) t.ok(outcomes.has(outcome), `outcome="${outcome}", which ForgeWebhookBadSignatures and ForgeWebhookDeliveriesFailed read`)
  const routes = new Set([...pages['items-list'].matchAll(/route="([^"]+)"/g), ...pages['forge-aggregator'].matchAll(/route="([^"]+)"/g)].map((match) => match[1]))
  for (const route of ['/items/', '/items/:item_name', '/api/forge/users', '/api/forge/repos']) t.ok(routes.has(route), route)
})
