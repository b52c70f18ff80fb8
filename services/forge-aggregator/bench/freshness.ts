/**
 * pnpm bench:freshness (docs/benchmarks.md, "Freshness: webhooks or a short TTL"): what webhooks
 * buy. Two ways of keeping users answers fresh, under the same load, compared by what they cost
 * upstream and by how long a reader goes on seeing a count that has changed:
 *
 *   A  webhooks on, FORGE_CACHE_TTL_SECONDS=86400: every star also sends the signed `star`
 *      delivery GitHub sends, through POST /api/forge/webhooks;
 *   B  webhooks off, FORGE_CACHE_TTL_SECONDS=300.
 *
 * Each scenario is the real app (`buildApp` on the real configuration schema, listening on
 * 127.0.0.1, asked over HTTP one request at a time) on a simulated clock: `buildApp`'s `clock`,
 * which the caches, the budget and the webhook drops read, so that days take seconds. Its
 * upstream is an in-process GitHub whose accounts change and which counts every call
 * (bench/stateful-upstream.ts). Readers ask for 1,000 users with Zipf (s = 1) popularity, as a
 * Poisson stream; 1 % of the users get a star each hour, drawn by the same Zipf by default: the
 * accounts people read most are the ones that get starred most, and a star nobody reads makes no
 * staleness anyone sees (--changed=uniform draws them uniformly). Both scenarios face the same
 * requests and stars (one seed). Each warms up for its TTL (at least an hour) first, so that
 * 24-hour answers expire inside the measured hours as they do in a service that has run for days.
 *
 * Figures are reported, not enforced: the exit code is 1 only when something is wrong (an answer
 * not 200 or partial, a delivery not applied, a warning logged, a call to an unknown path, or,
 * with webhooks, an answer that still shows a count a delivery has dropped).
 */
import { parseArgs } from 'node:util'
import { Client } from 'undici'
import { sign } from '@octokit/webhooks-methods'
import { loadConfig } from '@repo/config'
import { createLogger } from '@repo/service-kit'
import { buildApp } from '../src/app.ts'
import { ForgeAggregatorConfig } from '../src/config.ts'
import { createStatefulUpstream, UPSTREAM_ORIGIN, type CallTally, type Starred, type StatefulUpstream } from './stateful-upstream.ts'
import { exponentialGap, percentile, seededRandom, zipf, type Random } from './simulation.ts'

const HOUR_MS = 60 * 60 * 1000
/** Zipf's exponent of who is asked for (and, with --changed=zipf, of who is starred). */
const ZIPF_S = 1
/** Any fixed instant: the simulation never looks at the real time. */
const START = Date.UTC(2026, 0, 5)
const WEBHOOK_SECRET = 'bench-webhook-secret'
const INSTALLATION_ID = 9001

interface Scenario {
  name: string
  ttlSeconds: number
  webhooks: boolean
}

const SCENARIOS: readonly Scenario[] = [
  { name: 'A: webhooks, TTL 24 h', ttlSeconds: 86_400, webhooks: true },
  { name: 'B: no webhooks, TTL 5 min', ttlSeconds: 300, webhooks: false },
]

interface Options {
  users: number
  requestsPerHour: number
  changesPerHour: number
  changed: 'zipf' | 'uniform'
  hours: number
  /** `FORGE_CACHE_MAX_MB`: what the held upstream bodies may take decides which revalidations are 304s. */
  cacheMb: number
  /** The warm-up of every scenario; unset, each scenario's is its TTL, at least an hour. */
  warmUpHours: number | undefined
  seed: number
}

const DEFINITIONS = `
Staleness of a star: the time from the star until the last answer for that user that still showed
the count from before it; 0 when no answer after the star showed the old count. "How long after a
star does a reader still see the old count." Every star of the measured hours counts, including
those whose user nobody asked for before the cache would have revalidated anyway (0).
Old-count answers: the share of the measured hours' answers that showed fewer stars than GitHub had.
Calls: full 200 = core calls answered with a body, to an If-None-Match or not; answered 304 = an
If-None-Match matched; charged = full 200 + searches: GitHub does not charge an authenticated
caller's 304, and searches (no ETag) always answer 200, on their own limit. GitHub's limits for a
token: 5,000 core calls/h, 30 searches/min (1,800/h). The fake upstream enforces none: these are
what the service asks for.`

const options = parseOptions()
/** What went wrong, each said once; a service that goes on failing fills no memory. */
const problems = new Set<string>()
const problem = (line: string) => void (problems.size < 50 && problems.add(line))
console.log(
  `forge-aggregator freshness: ${options.users} users, Zipf s=${ZIPF_S}, ${options.requestsPerHour} requests/h (Poisson), ` +
    `${options.changesPerHour} stars/h on users drawn ${options.changed === 'zipf' ? 'by the same Zipf' : 'uniformly'}, ` +
    `${options.warmUpHours === undefined ? 'a warm-up of a TTL (at least 1 h)' : `${options.warmUpHours} h warm-up`} + ${options.hours} h measured, seed ${options.seed}\n`,
)
const results: Record<string, Awaited<ReturnType<typeof runScenario>>> = {}
for (const scenario of SCENARIOS) {
  const started = performance.now()
  results[scenario.name] = await runScenario(scenario, options)
  console.log(`${scenario.name}: simulated in ${((performance.now() - started) / 1000).toFixed(0)} s`)
}
console.log('\nUpstream calls per hour (measured hours)')
console.table(Object.fromEntries(Object.entries(results).map(([name, run]) => [name, run.calls])))
console.log('Staleness after a star (stars of the measured hours)')
console.table(Object.fromEntries(Object.entries(results).map(([name, run]) => [name, run.staleness])))
console.log('How the answers were made, per hour')
console.table(Object.fromEntries(Object.entries(results).map(([name, run]) => [name, run.answers])))
console.log(DEFINITIONS)
if (problems.size > 0) {
  console.error(`\nFUNCTIONAL PROBLEMS (exit 1):\n${[...problems].map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}

/** A scenario's warm-up (ms): long enough for its answers to expire once before the measured hours. */
function warmUpOf(scenario: Scenario, options: Options): number {
  return options.warmUpHours === undefined ? Math.max(HOUR_MS, scenario.ttlSeconds * 1000) : options.warmUpHours * HOUR_MS
}

/** When a scenario starts, is measured, and ends, on the simulated clock (ms). */
interface Window {
  startsAt: number
  measuredFrom: number
  measuredTo: number
  end: number
}

/**
 * Every scenario's measured hours are the same hours of one workload; a scenario with a shorter
 * warm-up starts later in it. Past the measured hours readers go on asking, without stars, for a
 * TTL (at most an hour): the answers held at a late star expire meanwhile, so that star is judged
 * as fully as the others.
 */
function windowOf(scenario: Scenario, options: Options): Window {
  const measuredFrom = START + Math.max(...SCENARIOS.map((each) => warmUpOf(each, options)))
  const measuredTo = measuredFrom + options.hours * HOUR_MS
  const startsAt = measuredFrom - warmUpOf(scenario, options)
  return { startsAt, measuredFrom, measuredTo, end: measuredTo + Math.min(scenario.ttlSeconds * 1000, HOUR_MS) }
}

/** What one scenario's events act on and add to. */
interface Run {
  scenario: Scenario
  upstream: StatefulUpstream
  service: Client
  tracker: StalenessTracker
  /** Stars shown by each answer body seen, by login and ETag: each body is parsed once. */
  starsByEtag: Map<string, number>
  nextDeliveryId: () => string
  /** How the measured hours' answers were made. */
  made: Record<CacheResult, number>
}

/** Simulates one scenario from a cold start: its calls, its staleness, and how its answers were made. */
async function runScenario(scenario: Scenario, options: Options) {
  const window = windowOf(scenario, options)
  const clock = { time: window.startsAt, now: () => clock.time }
  const upstream = createStatefulUpstream()
  const app = await buildScenarioApp(scenario, options, upstream, clock)
  const service = new Client(await app.listen({ host: '127.0.0.1', port: 0 }))
  const run: Run = {
    scenario,
    upstream,
    service,
    tracker: stalenessTracker(),
    starsByEtag: new Map(),
    nextDeliveryId: deliveryIds(),
    made: { hit: 0, revalidated: 0, miss: 0, stale: 0 },
  }
  const tallies: { atStart?: CallTally; atEnd?: CallTally } = {}
  try {
    for (const event of workload(options, window.end, window.measuredTo)) {
      if (!tallies.atStart && event.at >= window.measuredFrom) tallies.atStart = upstream.tally()
      if (!tallies.atEnd && event.at >= window.measuredTo) tallies.atEnd = upstream.tally()
      // Before its start a scenario's service sees nothing, but its upstream takes the stars all the same.
      if (event.at < window.startsAt) {
        if (event.kind === 'star') starOn(upstream, event)
        continue
      }
      clock.time = event.at
      const measured = event.at >= window.measuredFrom && event.at < window.measuredTo
      await (event.kind === 'star' ? star(run, event, measured) : ask(run, event, measured))
    }
  } finally {
    await service.close()
    await app.close()
    await upstream.close()
  }
  const calls = difference(tallies.atEnd ?? upstream.tally(), tallies.atStart ?? upstream.tally())
  if (calls.other > 0) problem(`${scenario.name}: ${calls.other} calls to paths GitHub would not know`)
  return { calls: callsPerHour(calls, options.hours), staleness: stalenessOf(run.tracker), answers: perHour(run.made, options.hours) }
}

function starOn(upstream: StatefulUpstream, event: WorkloadEvent): Starred {
  return upstream.star(loginOf(event.user), (count) => Math.floor(event.pick * count))
}

/** A star upstream and, with webhooks, GitHub's delivery of it. */
async function star(run: Run, event: WorkloadEvent, measured: boolean): Promise<void> {
  const login = loginOf(event.user)
  const starred = starOn(run.upstream, event)
  run.tracker.changed(login, starred.totalStars, event.at, measured)
  if (run.scenario.webhooks) await deliverStar(run.service, login, starred, event.at, run.nextDeliveryId)
}

/** A reader's request; with webhooks, an answer older than the last star is a problem (its delivery dropped it). */
async function ask(run: Run, event: WorkloadEvent, measured: boolean): Promise<void> {
  const login = loginOf(event.user)
  const answer = await read(run.service, login, run.starsByEtag)
  if (!answer) return
  const shown = run.tracker.answered(login, answer.stars, event.at, measured)
  if (run.scenario.webhooks && shown === 'old') problem(`${run.scenario.name}: ${login}'s answers (${answer.how}) still showed a count a delivery had dropped`)
  if (measured) run.made[answer.how]++
}

/** The app as production builds it, but on the bench's clock and upstream, logging warnings as problems. */
async function buildScenarioApp(scenario: Scenario, options: Options, upstream: StatefulUpstream, clock: { now: () => number }) {
  const env = {
    FORGE_API_URL: UPSTREAM_ORIGIN,
    // Authenticated, as a deployment with a GitHub App is: GitHub then charges no 304.
    FORGE_TOKEN: 'bench-token',
    FORGE_CACHE_TTL_SECONDS: String(scenario.ttlSeconds),
    FORGE_CACHE_MAX_MB: String(options.cacheMb),
    ...(scenario.webhooks ? { FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET } : {}),
  }
  const destination = { write: (line: string) => void problem(`${scenario.name}: the service logged ${line.trim().slice(0, 300)}`) }
  return buildApp(loadConfig(ForgeAggregatorConfig, env), { logger: createLogger('warn', destination), clock, dispatcher: upstream.dispatcher })
}

interface WorkloadEvent {
  at: number
  kind: 'read' | 'star'
  /** Popularity rank: 0 is the most asked for. */
  user: number
  /** Which of the user's repositories a star lands on, as a fraction of their count. */
  pick: number
}

/**
 * Reads (a Poisson stream at `requestsPerHour`, users by Zipf rank) and stars (exactly
 * `changesPerHour` in each hour, at uniform times, until `starsUntil`), merged in time order.
 * Each has a stream of its own, so the reads are the same whatever the stars are.
 */
function* workload(options: Options, end: number, starsUntil: number): Generator<WorkloadEvent> {
  const readRandom = seededRandom(options.seed, 0)
  const starRandom = seededRandom(options.seed, 1)
  const reader = zipf(options.users, ZIPF_S, readRandom)
  const starred = options.changed === 'zipf' ? zipf(options.users, ZIPF_S, starRandom) : () => Math.floor(starRandom() * options.users)
  const stars = starTimes(options.changesPerHour, starRandom)
  let nextRead = START + exponentialGap(options.requestsPerHour / HOUR_MS, readRandom)
  let nextStar = stars.next().value
  while (nextRead < end) {
    if (nextStar < nextRead && nextStar < starsUntil) {
      yield { at: nextStar, kind: 'star', user: starred(), pick: starRandom() }
      nextStar = stars.next().value
    } else {
      yield { at: nextRead, kind: 'read', user: reader(), pick: 0 }
      nextRead += exponentialGap(options.requestsPerHour / HOUR_MS, readRandom)
    }
  }
}

/** `perHour` instants in each hour from START, uniformly placed, in order, forever (never, with 0). */
function* starTimes(perHour: number, random: Random): Generator<number, never> {
  if (perHour === 0) for (;;) yield Number.POSITIVE_INFINITY
  for (let hour = 0; ; hour++) {
    const times = Array.from({ length: perHour }, () => START + (hour + random()) * HOUR_MS).sort((a, b) => a - b)
    yield* times
  }
}

function loginOf(rank: number): string {
  return `user-${String(rank + 1).padStart(4, '0')}`
}

/** How the cache made an answer, as `forge_cache_results_total` counts it (one request at a time: none is collapsed). */
type CacheResult = 'hit' | 'revalidated' | 'miss' | 'stale'

/** One reader's request: the stars its answer shows, and how the cache made it; undefined (a problem) when it is not a whole 200. */
async function read(service: Client, login: string, known: Map<string, number>): Promise<{ stars: number; how: CacheResult } | undefined> {
  const response = await service.request({ method: 'GET', path: `/api/forge/users?user_name=${login}` })
  const body = await response.body.text()
  const { etag, 'x-forge-partial': partial, 'cache-status': cacheStatus } = response.headers
  if (response.statusCode !== 200 || typeof etag !== 'string' || partial !== undefined) {
    problem(`a users answer was ${response.statusCode}${partial === undefined ? '' : ', partial'}: ${body.slice(0, 200)}`)
    return undefined
  }
  return { stars: starsIn(known, login, etag, body), how: cacheResultOf(String(cacheStatus)) }
}

/** The stars an answer shows. Its ETag is its body's: `known` keeps them by ETag, so that each body is parsed once. */
function starsIn(known: Map<string, number>, login: string, etag: string, body: string): number {
  const key = `${login} ${etag}`
  let stars = known.get(key)
  if (stars === undefined) known.set(key, (stars = (JSON.parse(body) as { stats: { totalStars: number } }).stats.totalStars))
  return stars
}

/** What a `Cache-Status` (src/cache/headers.ts) says of how the answer was made. */
function cacheResultOf(cacheStatus: string): CacheResult {
  if (cacheStatus.includes('detail=')) return 'stale'
  if (cacheStatus.includes('fwd=stale')) return 'revalidated'
  if (cacheStatus.includes('fwd=miss')) return 'miss'
  return 'hit'
}

/** Delivery GUIDs in order: the same every run, as the rest of the workload is. */
function deliveryIds(): () => string {
  let count = 0
  return () => `00000000-0000-4000-8000-${(++count).toString(16).padStart(12, '0')}`
}

/** GitHub's `star` delivery for `starred`, signed with the secret, to the real endpoint; anything but `applied` is a problem. */
async function deliverStar(service: Client, login: string, starred: Starred, at: number, nextId: () => string): Promise<void> {
  const id = nextId()
  const body = JSON.stringify({
    action: 'created',
    starred_at: new Date(at).toISOString(),
    repository: starred.repository,
    sender: { login: `stargazer-${id.slice(-6)}`, type: 'User' },
    installation: { id: INSTALLATION_ID, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uOTAwMQ==' },
  })
  const response = await service.request({
    method: 'POST',
    path: '/api/forge/webhooks',
    headers: {
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/bench',
      'x-github-event': 'star',
      'x-github-delivery': id,
      'x-github-hook-id': '1',
      'x-github-hook-installation-target-type': 'integration',
      'x-hub-signature-256': await sign(WEBHOOK_SECRET, body),
    },
    body,
  })
  const answer = await response.body.text()
  const outcome = response.statusCode === 200 ? (JSON.parse(answer) as { outcome: string }).outcome : `${response.statusCode} ${answer.slice(0, 200)}`
  if (outcome !== 'applied') problem(`a star delivery for ${login} was ${outcome}, not applied`)
}

interface Change {
  at: number
  /** The account's stars once this change is made: an answer showing fewer predates it. */
  starsAfter: number
  /** The last time an answer predating it was sent, if one was. */
  lastOldAnswerAt: number | undefined
  measured: boolean
}

type StalenessTracker = ReturnType<typeof stalenessTracker>

/** Each user's stars as changed upstream and as shown to readers: from them, each change's staleness. */
function stalenessTracker() {
  const changes = new Map<string, Change[]>()
  let staleAnswers = 0
  let measuredAnswers = 0
  return {
    changed(login: string, starsAfter: number, at: number, measured: boolean): void {
      const list = changes.get(login) ?? []
      list.push({ at, starsAfter, lastOldAnswerAt: undefined, measured })
      changes.set(login, list)
    },
    /** An answer for `login` showing `stars` was sent at `at`: whether that was the current count or an old one. */
    answered(login: string, stars: number, at: number, measured: boolean): 'current' | 'old' {
      const list = changes.get(login) ?? []
      // Changes are in order and stars only grow: the ones this answer predates are at the end.
      for (let index = list.length - 1; index >= 0 && list[index]!.starsAfter > stars; index--) list[index]!.lastOldAnswerAt = at
      const shown = (list.at(-1)?.starsAfter ?? 0) > stars ? 'old' : 'current'
      if (measured) {
        measuredAnswers++
        if (shown === 'old') staleAnswers++
      }
      return shown
    },
    /** Per change of the measured hours: how long after it the old count was still sent (0: never). */
    staleness(): number[] {
      return [...changes.values()].flat().filter((change) => change.measured).map((change) => (change.lastOldAnswerAt ?? change.at) - change.at)
    },
    staleAnswers: () => ({ stale: staleAnswers, of: measuredAnswers }),
  }
}

function callsPerHour(calls: CallTally, hours: number): Record<string, number> {
  const rate = (count: number) => Math.round(count / hours)
  return {
    total: rate(calls.full + calls.notModified + calls.searches + calls.other),
    'full 200': rate(calls.full),
    // Few means few held ETags to send: their bodies were pushed out of FORGE_CACHE_MAX_MB.
    'full 200 to If-None-Match': rate(calls.fullConditional),
    'answered 304': rate(calls.notModified),
    searches: rate(calls.searches),
    charged: rate(calls.full + calls.searches),
  }
}

function stalenessOf(tracker: StalenessTracker): Record<string, string | number> {
  const staleness = tracker.staleness()
  const { stale, of } = tracker.staleAnswers()
  return {
    stars: staleness.length,
    'seen late': staleness.filter((ms) => ms > 0).length,
    p50: duration(percentile(staleness, 50)),
    p90: duration(percentile(staleness, 90)),
    max: duration(Math.max(0, ...staleness)),
    'old-count answers': `${((100 * stale) / Math.max(1, of)).toFixed(2)} %`,
  }
}

function perHour(counts: Record<string, number>, hours: number): Record<string, number> {
  return Object.fromEntries(Object.entries(counts).map(([name, count]) => [name, Math.round(count / hours)]))
}

function difference(after: CallTally, before: CallTally): CallTally {
  return {
    full: after.full - before.full,
    fullConditional: after.fullConditional - before.fullConditional,
    notModified: after.notModified - before.notModified,
    searches: after.searches - before.searches,
    other: after.other - before.other,
  }
}

function duration(ms: number): string {
  const seconds = Math.round(ms / 1000)
  if (seconds < 60) return `${seconds} s`
  return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      users: { type: 'string', default: '1000' },
      'requests-per-hour': { type: 'string', default: '10000' },
      'changes-per-hour': { type: 'string' },
      changed: { type: 'string', default: 'zipf' },
      hours: { type: 'string', default: '24' },
      'warm-up-hours': { type: 'string' },
      seed: { type: 'string', default: '1' },
      'cache-mb': { type: 'string', default: '64' },
    },
  })
  const users = Number(values.users)
  const parsed = {
    users,
    requestsPerHour: Number(values['requests-per-hour']),
    // 1 % of the users an hour unless told.
    changesPerHour: values['changes-per-hour'] === undefined ? Math.round(users / 100) : Number(values['changes-per-hour']),
    changed: values.changed as Options['changed'],
    hours: Number(values.hours),
    warmUpHours: values['warm-up-hours'] === undefined ? undefined : Number(values['warm-up-hours']),
    seed: Number(values.seed),
    cacheMb: Number(values['cache-mb']),
  }
  const valid =
    Number.isInteger(users) && users >= 1 && users <= 100_000 &&
    parsed.requestsPerHour > 0 && parsed.requestsPerHour <= 1_000_000 &&
    Number.isInteger(parsed.changesPerHour) && parsed.changesPerHour >= 0 &&
    (parsed.changed === 'zipf' || parsed.changed === 'uniform') &&
    parsed.hours > 0 && parsed.hours <= 24 * 14 && (parsed.warmUpHours === undefined || parsed.warmUpHours >= 0) &&
    Number.isInteger(parsed.seed) &&
    Number.isInteger(parsed.cacheMb) && parsed.cacheMb >= 1 && parsed.cacheMb <= 4_096
  if (!valid) {
    console.error(
      'usage: bench:freshness [--users=1000] [--requests-per-hour=10000] [--changes-per-hour=users/100] [--changed=zipf|uniform] [--hours=24] [--warm-up-hours=TTL, at least 1] [--seed=1] [--cache-mb=64]',
    )
    process.exit(2)
  }
  return parsed
}
