/** The parts of a Grafana dashboard's JSON model these checks read. */
export interface Dashboard {
  title: string
  panels: Panel[]
  templating: { list: Variable[] }
}

export interface Panel {
  id: number
  type: string
  title: string
  description?: string
  datasource?: DatasourceRef
  targets?: { refId: string; expr: string; datasource?: DatasourceRef }[]
  /** A collapsed row holds its panels. */
  panels?: Panel[]
}

export interface Variable {
  name: string
  type: string
  query: string | { query: string }
  datasource?: DatasourceRef
}

interface DatasourceRef {
  type: string
  uid: string
}

/** One PromQL query of the dashboard, and where it is (`panel title / refId`). */
export interface DashboardQuery {
  where: string
  expr: string
}

/** The panels of the dashboard, those inside collapsed rows included, in order. */
export function panelsOf(dashboard: Dashboard): Panel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])])
}

/** Every PromQL query of every panel. */
export function panelQueries(dashboard: Dashboard): DashboardQuery[] {
  return panelsOf(dashboard).flatMap((panel) => (panel.targets ?? []).map((target) => ({ where: `${panel.title} / ${target.refId}`, expr: target.expr })))
}

/**
 * The metric and label each `label_values(metric, label)` variable lists (Grafana's own function,
 * not PromQL); a query variable of another form is reported by `dashboardProblems`.
 */
export function labelValuesQueries(dashboard: Dashboard): { where: string; metric: string; label: string }[] {
  return dashboard.templating.list.flatMap((variable) => {
    if (variable.type !== 'query') return []
    const query = typeof variable.query === 'string' ? variable.query : variable.query.query
    const match = /^label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)$/.exec(query)
    return match ? [{ where: `variable ${variable.name}`, metric: match[1]!, label: match[2]! }] : []
  })
}

/** The uid every Prometheus reference must use: the dashboard's datasource variable, so that it imports anywhere. */
export const DATASOURCE_UID = '${datasource}'

/**
 * What keeps the dashboard from importing into any Grafana: no `datasource` variable of type
 * datasource for Prometheus; a panel, query or query variable whose datasource is not that
 * variable (a uid of one Grafana); a query variable that is not `label_values(metric, label)`;
 * a panel without a description (what it shows is said on the panel, not only in docs/monitoring.md,
 * "The dashboard").
 */
export function dashboardProblems(dashboard: Dashboard): string[] {
  const problems: string[] = []
  const variable = dashboard.templating.list.find((each) => each.name === 'datasource')
  if (variable?.type !== 'datasource' || variable.query !== 'prometheus') problems.push('no datasource variable for Prometheus')
  const isTemplated = (ref: DatasourceRef | undefined) => ref?.type === 'prometheus' && ref.uid === DATASOURCE_UID
  for (const panel of panelsOf(dashboard)) {
    if (panel.type === 'row') continue
    if (!panel.description) problems.push(`${panel.title}: no description`)
    // A panel without queries (text) needs no datasource.
    if (!panel.targets) continue
    if (!isTemplated(panel.datasource)) problems.push(`${panel.title}: datasource is not ${DATASOURCE_UID}`)
    for (const target of panel.targets) {
      if (!isTemplated(target.datasource)) problems.push(`${panel.title} / ${target.refId}: datasource is not ${DATASOURCE_UID}`)
    }
  }
  const listed = new Set(labelValuesQueries(dashboard).map((query) => query.where))
  for (const each of dashboard.templating.list.filter((each) => each.type === 'query')) {
    if (!isTemplated(each.datasource)) problems.push(`variable ${each.name}: datasource is not ${DATASOURCE_UID}`)
    if (!listed.has(`variable ${each.name}`)) problems.push(`variable ${each.name}: not a label_values(metric, label) query`)
  }
  return problems
}
