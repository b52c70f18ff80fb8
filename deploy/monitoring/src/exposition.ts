/** Each metric name a `/metrics` page exposes, with every label name its samples carry. */
export type Exposed = ReadonlyMap<string, ReadonlySet<string>>

const SAMPLE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s/
const LABEL = /([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"/g

/**
 * The series names of Prometheus text-format pages and their labels, read from the samples
 * themselves: a classic histogram appears as its `_bucket` (with `le`), `_sum` and `_count`
 * series, as a query must name it. Pages are merged (several services, one Prometheus).
 */
export function exposedBy(...pages: readonly string[]): Exposed {
  const exposed = new Map<string, Set<string>>()
  for (const line of pages.flatMap((page) => page.split('\n'))) {
    const match = SAMPLE.exec(line)
    if (!match) continue
    const labels = exposed.get(match[1]!) ?? new Set<string>()
    for (const [, label] of (match[2] ?? '').matchAll(LABEL)) labels.add(label!)
    exposed.set(match[1]!, labels)
  }
  return exposed
}
