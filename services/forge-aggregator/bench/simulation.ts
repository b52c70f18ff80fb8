/**
 * What a simulated workload is drawn from: a seeded pseudo-random generator (the same seed gives
 * the same requests and changes, so two runs, or two scenarios of one run, face the same load),
 * Zipf ranks, Poisson arrivals, and the percentiles a report gives.
 */

/** A pseudo-random number in [0, 1). */
export type Random = () => number

/**
 * Mulberry32: 32 bits of state, fast, and good enough to draw a workload from (not for secrets).
 * Distinct `stream`s of one seed give independent sequences, so drawing more of one (changes)
 * never shifts the other (requests).
 */
export function seededRandom(seed: number, stream = 0): Random {
  let state = (Math.imul(seed, 0x9e3779b1) ^ Math.imul(stream + 1, 0x85ebca77)) >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let mixed = Math.imul(state ^ (state >>> 15), state | 1)
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61)
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296
  }
}

/**
 * Draws ranks 0…n-1 with probability proportional to 1 / (rank + 1)^s: rank 0 is the most asked
 * for. The cumulative weights are computed once; each draw is a binary search.
 */
export function zipf(n: number, s: number, random: Random): () => number {
  const cumulative: number[] = []
  let total = 0
  for (let rank = 1; rank <= n; rank++) cumulative.push((total += 1 / rank ** s))
  return () => {
    const target = random() * total
    let low = 0
    let high = n - 1
    while (low < high) {
      const middle = (low + high) >>> 1
      if (cumulative[middle]! <= target) low = middle + 1
      else high = middle
    }
    return low
  }
}

/** The gap to the next arrival of a Poisson process of `perMs` arrivals per ms. */
export function exponentialGap(perMs: number, random: Random): number {
  return -Math.log(1 - random()) / perMs
}

/** Nearest-rank percentile of `values` (0 when there are none). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!
}
