import t from 'tap'
import { readFile } from 'node:fs/promises'
import { ALERTS_PATH, ALERTS_TEST_PATH } from '../src/files.ts'
import { runPromtool, whyNoPromtool } from '../src/promtool.ts'
import { ruleGroupsOf } from '../src/rules.ts'
import { parse } from 'yaml'

const skip = await whyNoPromtool()

t.test('alerts.yml is a valid rule file (promtool check rules)', { skip }, async (t) => {
  const { code, output } = await runPromtool(['check', 'rules', ALERTS_PATH])
  t.equal(code, 0, output)
  t.match(output, /SUCCESS: \d+ rules found/)
})

t.test('every alert fires in its promtool unit test, and stays silent where it should (promtool test rules)', { skip }, async (t) => {
  const { code, output } = await runPromtool(['test', 'rules', ALERTS_TEST_PATH])
  t.equal(code, 0, output)
})

t.test('every alert of alerts.yml has a unit test in which it fires', async (t) => {
  const alerts = ruleGroupsOf(await readFile(ALERTS_PATH, 'utf8')).flatMap((group) => group.rules.map((rule) => rule.alert))
  const tests = parse(await readFile(ALERTS_TEST_PATH, 'utf8')) as {
    tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[]
  }
  const firing = new Set(tests.tests.flatMap((each) => each.alert_rule_test ?? []).filter((test) => test.exp_alerts.length > 0).map((test) => test.alertname))
  const silent = new Set(tests.tests.flatMap((each) => each.alert_rule_test ?? []).filter((test) => test.exp_alerts.length === 0).map((test) => test.alertname))
  t.same(alerts.filter((alert) => !firing.has(alert!)), [], 'alerts without a test in which they fire')
  t.same(alerts.filter((alert) => !silent.has(alert!)), [], 'alerts without a test in which they stay silent')
  t.same(alerts.sort(), [
    'ForgeAppInstallationLookupsFailing',
    'ForgeServingStale',
    'ForgeSharedStoreDown',
    'ForgeUpstreamBudgetBelowReserve',
    'ForgeUpstreamErrors',
    'ForgeWebhookBadSignatures',
    'ForgeWebhookDeliveriesFailed',
    'HttpServerErrors',
    'HttpSlowRoute',
    'ItemsEventsReaderStuck',
    'ItemsListNearCap',
    'ItemsStoreDown',
    'ItemsStoreInconsistent',
  ], 'the alerts docs/monitoring.md, "Alerts" lists, the shared cache’s store, the list’s cap and keys, the webhook’s deliveries and the public App’s installation lookups')
})
