/**
 * How a service's appends went in groups, from its /metrics (`items_store_append_group_size`):
 * the mean group and how many groups fell in each bucket, as one line; a version without the
 * histogram (before appends were grouped) says so.
 */
export async function groupSizes(url: string): Promise<string> {
  const page = await (await fetch(`${url}/metrics`)).text()
  const figure = (suffix: string) => Number(new RegExp(`^items_store_append_group_size${suffix} (\\S+)$`, 'm').exec(page)?.[1])
  const groups = figure('_count')
  if (Number.isNaN(groups)) return 'not measured (no items_store_append_group_size: one script call per append)'
  const buckets = [...page.matchAll(/^items_store_append_group_size_bucket\{le="([^"]+)"\} (\d+)$/gm)].map(([, le, count]) => [le!, Number(count)] as const)
  const per = buckets.map(([le, count], index) => `≤${le}: ${count - (index > 0 ? buckets[index - 1]![1] : 0)}`)
  return `${(figure('_sum') / groups).toFixed(1)} on average over ${groups} groups (${per.join(', ')})`
}
