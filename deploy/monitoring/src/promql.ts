import { parser } from '@prometheus-io/lezer-promql'
import type { Exposed } from './exposition.ts'

type SyntaxNode = ReturnType<typeof parser.parse>['topNode']

/**
 * Labels Prometheus adds to every series it scrapes (the target's `job` and `instance`): no
 * service exposes them, every query may use them. A relabelling that adds others (`namespace`,
 * `pod`) is a choice of the deployment, which these queries must not depend on.
 */
export const TARGET_LABELS: ReadonlySet<string> = new Set(['job', 'instance'])

/**
 * Grafana's built-in interval variables, replaced by a duration before parsing; other template
 * variables may appear only inside strings (`job=~"$job"`), where PromQL does not look.
 */
const GRAFANA_DURATIONS = /\$(?:__rate_interval|__interval|__range)\b|\$\{(?:__rate_interval|__interval|__range)\}/g

/**
 * What is wrong with `query` against what the services expose, one line per problem (none: it
 * parses and names only what is there):
 *
 * - it does not parse as PromQL (Prometheus's own Lezer grammar);
 * - a selector has no metric name, or names a metric no service exposes, or matches a label that
 *   metric does not have;
 * - a `by`/`without`/`on`/`ignoring`/`group_left`/`group_right` names a label that is not on every
 *   metric selected under it.
 *
 * `job` and `instance` are on every series (`TARGET_LABELS`).
 */
export function queryProblems(query: string, exposed: Exposed): string[] {
  const text = query.replace(GRAFANA_DURATIONS, '5m')
  const textOf = (node: SyntaxNode) => text.slice(node.from, node.to)
  // A label name as written: bare, or quoted ("a", 'a' or `a`).
  const labelOf = (node: SyntaxNode) => (node.name === 'LabelName' ? textOf(node) : textOf(node).slice(1, -1))
  const hasLabel = (metric: string, label: string) => TARGET_LABELS.has(label) || exposed.get(metric)!.has(label)

  const problems: string[] = []
  const selectors: { metric: string; from: number; to: number }[] = []
  const groupings: SyntaxNode[] = []
  parser.parse(text).iterate({
    enter: (ref) => {
      if (ref.type.isError) {
        problems.push(`does not parse at ${ref.from}: ${JSON.stringify(text.slice(Math.max(0, ref.from - 20), ref.from + 20))}`)
        return false
      }
      if (ref.name === 'GroupingLabels') groupings.push(ref.node)
      if (ref.name !== 'VectorSelector') return undefined
      const identifier = ref.node.getChild('Identifier')
      if (!identifier) {
        problems.push(`${textOf(ref.node)}: a selector without a metric name`)
        return false
      }
      const metric = textOf(identifier)
      if (!exposed.has(metric)) problems.push(`${metric}: no service exposes it`)
      else selectors.push({ metric, from: ref.from, to: ref.to })
      for (const label of matchedLabels(ref.node).map(labelOf)) {
        if (exposed.has(metric) && !hasLabel(metric, label)) problems.push(`${metric}: has no label ${label}`)
      }
      return false
    },
  })

  for (const grouping of groupings) {
    // The aggregation or binary operation the labels belong to: everything it selects must carry them.
    const scope = grouping.parent!.parent!
    const metrics = selectors.filter((selector) => selector.from >= scope.from && selector.to <= scope.to).map((selector) => selector.metric)
    for (const label of [...grouping.getChildren('LabelName'), ...grouping.getChildren('QuotedLabelName')].map(labelOf)) {
      for (const metric of new Set(metrics)) if (!hasLabel(metric, label)) problems.push(`${metric}: has no label ${label} (grouped by it)`)
    }
  }
  return problems
}

/** The label-name nodes of a selector's matchers: `name="…"` and `"name"="…"`. */
function matchedLabels(selector: SyntaxNode): SyntaxNode[] {
  const matchers = selector.getChild('LabelMatchers')
  if (!matchers) return []
  return [
    ...matchers.getChildren('UnquotedLabelMatcher').flatMap((matcher) => matcher.getChildren('LabelName')),
    ...matchers.getChildren('QuotedLabelMatcher').flatMap((matcher) => matcher.getChildren('QuotedLabelName')),
  ]
}
