/**
 * What each function costs a request, from a server counted by `PROFILE=<dir> pnpm
 * bench:instructions` (scripts/callgrind-bench.sh): the instructions callgrind counted in each
 * JavaScript function, with the V8 and Node internals it called but not the JavaScript it called
 * (see `costPerRequest`), divided by the requests counted. callgrind sees the code V8 compiles at
 * run time only as addresses; the perf map V8 writes under `--perf-basic-prof` names them. Given a
 * second server, prints the difference: what the first spends that the second does not.
 *
 *   usage: node scripts/callgrind-functions.ts <requests> <profile> [<other profile>] [rows]
 *   (a profile is the path kept by the bench without its extension: <dir>/<label>)
 * Needs callgrind_annotate (Debian: valgrind).
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** A range of addresses the JIT placed one function's code in, as the perf map lists it. */
interface CodeRange {
  start: number
  end: number
  name: string
}

const [requestsArgument, profile, other, rowsArgument] = process.argv.slice(2)
const requests = Number(requestsArgument)
if (!Number.isInteger(requests) || requests <= 0 || profile === undefined) {
  console.error('usage: node scripts/callgrind-functions.ts <requests> <profile> [<other profile>] [rows]')
  process.exit(2)
}
const rows = Number(rowsArgument ?? 40)

const costs = costPerRequest(profile)
if (other === undefined) {
  for (const [name, cost] of [...costs].sort((a, b) => b[1] - a[1]).slice(0, rows)) console.log(`${format(cost)}  ${name}`)
} else {
  const others = costPerRequest(other)
  const names = new Set([...costs.keys(), ...others.keys()])
  const difference = (name: string) => (costs.get(name) ?? 0) - (others.get(name) ?? 0)
  const row = (name: string) => console.log(`${format(costs.get(name) ?? 0)} ${format(others.get(name) ?? 0)} ${format(difference(name), true)}  ${name}`)
  const sorted = [...names].sort((a, b) => difference(b) - difference(a))
  console.log(`${'this'.padStart(9)} ${'other'.padStart(9)} ${'more'.padStart(9)}`)
  sorted.slice(0, rows).forEach(row)
  // What the other spends and this does not, usually the same work done another way.
  console.log('and the other way round:')
  sorted.filter((name) => difference(name) < -0.5).reverse().slice(0, Math.ceil(rows / 4)).forEach(row)
  const total = (counts: Map<string, number>) => [...counts.values()].reduce((sum, cost) => sum + cost, 0)
  console.log(`${format(total(costs))} ${format(total(others))} ${format(total(costs) - total(others), true)}  in all`)
}

/** A function as callgrind's caller tree shows it: its own instructions, and what each caller spent in it. */
interface Counted {
  own: number
  callers: Map<string, number>
}

/**
 * Instructions per request by the code that spent them, for one kept profile: each JavaScript
 * function (and each compiled regular expression) with the V8 builtins, runtime and Node
 * functions it called, these shared among their callers in proportion to what each spent in them.
 * Counted by function alone, most of a request sits in builtins any code calls (property lookups,
 * string additions, closures), which says nothing about which step of the request needed them.
 */
function costPerRequest(path: string): Map<string, number> {
  const counted = callerTree(path)
  const shares = new Map<string, Map<string, number>>()
  const visiting = new Set<string>()
  // Who a function's instructions belong to: itself if it is code of the program, else its callers'.
  const shareOf = (name: string): Map<string, number> => {
    const known = shares.get(name)
    if (known) return known
    const callers = counted.get(name)?.callers
    if (name.startsWith('JS:') || name.startsWith('RegExp') || !callers?.size || visiting.has(name)) return new Map([[name, 1]])
    visiting.add(name)
    const share = new Map<string, number>()
    const total = [...callers.values()].reduce((sum, cost) => sum + cost, 0)
    for (const [caller, cost] of callers) {
      for (const [owner, part] of shareOf(caller)) share.set(owner, (share.get(owner) ?? 0) + (part * cost) / total)
    }
    visiting.delete(name)
    shares.set(name, share)
    return share
  }
  const costs = new Map<string, number>()
  for (const [name, { own }] of counted) {
    for (const [owner, part] of shareOf(name)) costs.set(owner, (costs.get(owner) ?? 0) + (own * part) / requests)
  }
  return costs
}

/** Every function of the profile with its own instructions and its callers (`callgrind_annotate --tree=caller`). */
function callerTree(path: string): Map<string, Counted> {
  const nameOf = jitNames(readFileSync(`${path}.map`, 'utf8'))
  const annotated = execFileSync('callgrind_annotate', ['--tree=caller', '--inclusive=no', '--threshold=100', `${path}.callgrind`], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  })
  const counted = new Map<string, Counted>()
  let callers = new Map<string, number>()
  // A function's block: its callers (`<`, each with what it spent in the function), then itself (`*`).
  for (const line of annotated.split('\n')) {
    const match = /^\s*([\d,]+) \([^)]*\)\s+([<*])\s+(\S.*?)(?: \([\d,]+x\))?(?: \[.*\])?$/.exec(line)
    if (!match) continue
    const cost = Number(match[1]!.replaceAll(',', ''))
    // callgrind marks a function's recursive calls with a depth ('2); they are the same function.
    const symbol = match[3]!.replace(/'\d+$/, '')
    const address = /^\?\?\?:0x([0-9a-f]+)$/.exec(symbol)
    const name = address ? nameOf(Number.parseInt(address[1]!, 16)) : symbol.replace(/^\?\?\?:/, '')
    if (match[2] === '<') {
      callers.set(name, (callers.get(name) ?? 0) + cost)
      continue
    }
    const entry = counted.get(name) ?? { own: 0, callers: new Map<string, number>() }
    entry.own += cost
    for (const [caller, spent] of callers) entry.callers.set(caller, (entry.callers.get(caller) ?? 0) + spent)
    counted.set(name, entry)
    callers = new Map()
  }
  return counted
}

/**
 * The function whose code holds an address. The map only grows: when V8 frees code, later code can
 * take its addresses, so a range replaces every earlier one it overlaps. The counted requests
 * come last, so the latest code at an address is the code they ran. The marks V8 puts before a
 * name (its tier: `*` optimized, `~` interpreted, `^`/`+` baseline/Maglev) are dropped: a
 * function counts once, whatever tier ran it.
 */
function jitNames(map: string): (address: number) => string {
  const ranges: CodeRange[] = []
  for (const line of map.split('\n')) {
    const [start, size, ...name] = line.split(' ')
    if (!start || !size) continue
    const range = { start: Number.parseInt(start, 16), end: Number.parseInt(start, 16) + Number.parseInt(size, 16), name: name.join(' ').replace(/^JS:[*~^+]?'?/, 'JS:') }
    const first = firstEndingAfter(ranges, range.start)
    let last = first
    while (last < ranges.length && ranges[last]!.start < range.end) last++
    ranges.splice(first, last - first, range)
  }
  return (address) => {
    const range = ranges[firstEndingAfter(ranges, address)]
    return range !== undefined && range.start <= address ? range.name : `0x${address.toString(16)}`
  }
}

/** The index of the first of the sorted, disjoint `ranges` that ends after `address`. */
function firstEndingAfter(ranges: CodeRange[], address: number): number {
  let low = 0
  let high = ranges.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (ranges[middle]!.end <= address) low = middle + 1
    else high = middle
  }
  return low
}

function format(cost: number, signed = false): string {
  const rounded = Math.round(cost)
  return `${signed && rounded > 0 ? '+' : ''}${rounded.toLocaleString('en-US')}`.padStart(9)
}
