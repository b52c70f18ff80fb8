import { fileURLToPath } from 'node:url'

/** The alerting rules, their promtool unit tests and the dashboard, beside this package in deploy/. */
export const ALERTS_PATH = fileURLToPath(new URL('../../prometheus/alerts.yml', import.meta.url))
export const ALERTS_TEST_PATH = fileURLToPath(new URL('../../prometheus/alerts.test.yml', import.meta.url))
export const DASHBOARD_PATH = fileURLToPath(new URL('../../grafana/forge-items.json', import.meta.url))
