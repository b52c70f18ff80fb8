import { parse } from 'yaml'

/** A Prometheus rule file's groups, as `rule_files:` and a PrometheusRule's `spec.groups` hold them. */
export interface RuleGroup {
  name: string
  rules: { alert?: string; record?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[]
}

/** The groups of a rule file's YAML text. */
export function ruleGroupsOf(text: string): RuleGroup[] {
  return (parse(text) as { groups: RuleGroup[] }).groups
}

/** Every rule's expression, and its name (`alert` or `record`). */
export function ruleQueries(groups: readonly RuleGroup[]): { where: string; expr: string }[] {
  return groups.flatMap((group) => group.rules.map((rule) => ({ where: `${group.name} / ${rule.alert ?? rule.record}`, expr: rule.expr })))
}
