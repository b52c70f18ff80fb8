import { readFileSync } from 'node:fs'
import autocannon from 'autocannon'

/**
 * How both services' `pnpm bench` set a service against its ceiling (docs/benchmarks.md): the
 * same requests on each, in slices that alternate between the two, after one slice each to warm
 * up, each figure the median of its side's slices, so that whatever else the machine does weighs
 * on both alike.
 */

/** Of a core: a process busy this much or more could have gone no faster. */
const BUSY = 0.9

export interface BenchServer {
  url: string
  pid: number | undefined
  /** What autocannon sends to this side, when it is not the load's `requests` (a ceiling's route of another path). */
  requests?: autocannon.Request[]
}

export interface SliceLoad {
  /** What autocannon sends, in turn, on every connection. */
  requests: autocannon.Request[]
  connections: number
  pipelining?: number
  sliceSeconds: number
  /** Slices per side, after the warm-up. */
  rounds: number
}

/** One side's medians. */
export interface SideFigures {
  rate: number
  cpuPerRequest: number
  serverBusy: number
  generatorBusy: number
}

/**
 * `load` on the service and on its ceiling, in alternating slices: each side's medians. A slice
 * with a failed or non-2xx answer is reported to `onProblem`.
 */
export async function compareInSlices(
  service: BenchServer,
  ceiling: BenchServer,
  load: SliceLoad,
  onProblem: (problem: string) => void,
): Promise<{ service: SideFigures; ceiling: SideFigures }> {
  const sides = [
    { server: service, slices: [] as SideFigures[] },
    { server: ceiling, slices: [] as SideFigures[] },
  ]
  for (const side of sides) await slice(side.server, load, onProblem)
  for (let round = 0; round < load.rounds; round++) {
    // Each round starts with the other side, so that neither always follows the other.
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) side.slices.push(await slice(side.server, load, onProblem))
  }
  const [own, bare] = sides.map(({ slices }) => ({
    rate: median(slices.map((figures) => figures.rate)),
    cpuPerRequest: median(slices.map((figures) => figures.cpuPerRequest)),
    serverBusy: median(slices.map((figures) => figures.serverBusy)),
    generatorBusy: median(slices.map((figures) => figures.generatorBusy)),
  })) as [SideFigures, SideFigures]
  return { service: own, ceiling: bare }
}

/**
 * Prints both sides' figures and the ratio service / ceiling of requests/s against `target`, and
 * returns that ratio. A server busy BUSY of a core set its own pace; below that, the load
 * generator (autocannon, in the bench's process) did when it was busy BUSY of the time, and the
 * rates then measure it rather than the service: the target is then held against CPU per request;
 * else the machine's other work did, and CPU per request is the steadier comparison.
 */
export function reportComparison(title: string, figures: { service: SideFigures; ceiling: SideFigures }, target: number): number {
  const limitOf = (side: SideFigures) => (side.serverBusy >= BUSY ? 'server' : side.generatorBusy >= BUSY ? 'LOAD GENERATOR' : 'machine')
  const sides = Object.entries(figures)
  console.log(title)
  console.table(
    Object.fromEntries(
      sides.map(([name, side]) => [
        name,
        {
          'req/s': Math.round(side.rate),
          'CPU µs/request': Math.round(side.cpuPerRequest * 10) / 10,
          'server busy (of a core)': percent(side.serverBusy),
          'load generator busy': percent(side.generatorBusy),
          'limited by': limitOf(side),
        },
      ]),
    ),
  )
  const ratio = figures.service.rate / figures.ceiling.rate
  const byCost = figures.ceiling.cpuPerRequest / figures.service.cpuPerRequest
  const limits = sides.map(([, side]) => limitOf(side))
  const verdict = (value: number) => (value >= target ? 'met' : 'NOT MET')
  if (limits.includes('LOAD GENERATOR')) {
    // The rates then measure autocannon; what each server spent per request still measures it.
    console.log(`  service / ceiling, req/s: ${ratio.toFixed(2)}  (the load generator set the pace: not a measure of the service)`)
    console.log(`  by cost, CPU per request, ceiling / service: ${byCost.toFixed(2)}  (target >= ${target}: ${verdict(byCost)})`)
  } else {
    console.log(`  service / ceiling, req/s: ${ratio.toFixed(2)}  (target >= ${target}: ${verdict(ratio)})`)
    console.log(`  the same by cost, CPU per request, ceiling / service: ${byCost.toFixed(2)}`)
  }
  if (limits.includes('machine')) console.log('  a server used less than a core: CPU per request is the steadier figure')
  console.log('')
  return ratio
}

/**
 * CPU time (user + system, every thread) process `pid` has used, in µs, from /proc: on a shared
 * two-core machine the rate a server reaches moves with its neighbours and with the load
 * generator, its cost per request much less. Undefined where there is no /proc.
 */
function cpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    // Fields 14 and 15 (utime, stime) in clock ticks of 10 ms (USER_HZ is 100 on Linux);
    // the command name, field 2, is in parentheses and may hold spaces.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}

/** One slice of `load` on `server`: its requests/s, and its CPU per request and share of a core. */
async function slice(server: BenchServer, load: SliceLoad, onProblem: (problem: string) => void): Promise<SideFigures> {
  const before = cpuMicros(server.pid) ?? Number.NaN
  const generatorBefore = process.cpuUsage()
  const result = await autocannon({
    url: server.url,
    connections: load.connections,
    pipelining: load.pipelining ?? 1,
    duration: load.sliceSeconds,
    requests: server.requests ?? load.requests,
  })
  const generator = process.cpuUsage(generatorBefore)
  const cpu = (cpuMicros(server.pid) ?? Number.NaN) - before
  const failed = result.non2xx + result.errors
  if (failed > 0) onProblem(`${failed} of ${result.requests.total} requests to ${server.url} failed or were not 2xx`)
  return {
    rate: result.requests.total / result.duration,
    cpuPerRequest: cpu / result.requests.total,
    serverBusy: cpu / (result.duration * 1e6),
    generatorBusy: (generator.user + generator.system) / (result.duration * 1e6),
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

function percent(share: number): string {
  return `${Math.round(share * 100)} %`
}

/**
 * `requests` on `url` from `connections` connections, one request at a time on each, for
 * `seconds`: the requests/s. Rejects when a request failed or was not 2xx. For a load that is
 * not a comparison: a profile's (items-list's `bench:profile`).
 */
export async function loadFor(url: string, requests: autocannon.Request[], connections: number, seconds: number): Promise<number> {
  const result = await autocannon({ url, connections, duration: seconds, requests })
  const failed = result.non2xx + result.errors
  if (failed > 0) throw new Error(`${failed} of ${result.requests.total} requests to ${url} failed or were not 2xx`)
  return result.requests.total / result.duration
}
