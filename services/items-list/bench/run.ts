/**
 * pnpm bench: items-list against its two ceilings, in one run, on this machine.
 *
 * Four servers take turns on the same load, the list reset to the same 100 names before every
 * measurement:
 *   - the HTTP ceiling: a bare Fastify route answering from memory (bench/ceiling-server.ts);
 *   - the stack ceiling: a bare Fastify route doing the same single Redis command with the same
 *     client, configured as the service's (both ceilings send the service's security headers);
 *   - the service as `pnpm start` runs it (default configuration: info logging to stdout, one
 *     access line per request, request ids, metrics, security headers);
 *   - the same service on a durable Redis (AOF, appendfsync always: production's setting);
 *   - the service with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT at a local OTLP endpoint that
 *     drops what it gets): what tracing costs a request. Its own row is the off figure.
 * The first three share a Redis without persistence, and the ratio service / stack ceiling is
 * taken there (DESIGN §10): with an fsync on every write, the disk caps service and ceiling alike
 * and the ratio says nothing of the service's code. What the service does on a durable Redis is
 * reported beside it as absolute requests/s.
 *
 * The load generator (autocannon, in this process) must not be the bottleneck: when the HTTP
 * ceiling does not reach twice the service's requests/s in the same run, the run is client-bound
 * and the report says its ratio means nothing. Each server runs in its own process, its logs to
 * /dev/null; the servers take turns for several rounds and each figure is the median of its
 * rounds, so that a noisy neighbour on a shared machine moves all of them alike instead of
 * skewing one. Figures are reported, not enforced: the exit code is 0 whatever they are.
 */
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { createClient } from 'redis'
import {
  cpuMicros,
  eventually,
  findFreePort,
  loadGeneratorHeadroom,
  runServiceSource,
  startOtlpSink,
  startPrivateRedis,
  type PrivateRedis,
  type RunningProcess,
} from '@repo/test-support'
import { NEW_ITEM, PREFILLED_NAMES } from './names.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const CONNECTIONS = 50
const ROUNDS = 3
const WARMUP_SECONDS = 1
const MEASURE_SECONDS = 5
/** DESIGN §6: the service reaches at least this share of the stack ceiling's requests/s. */
const TARGET_VS_STACK = 0.9
/** DESIGN §10: below this, HTTP ceiling / service, the load generator may be what limits the service. */

interface Measurement {
  requestsPerSecond: number
  p50: number
  p99: number
  non2xx: number
  /** CPU the server process spent per answered request (µs), all its threads; undefined without /proc. */
  cpuMicrosPerRequest: number | undefined
}

type ServerKind = 'http ceiling' | 'stack ceiling' | 'service' | 'service, durable Redis' | 'service, tracing on'
const KINDS: ServerKind[] = ['http ceiling', 'stack ceiling', 'service', 'service, durable Redis', 'service, tracing on']

interface Scenario {
  label: string
  request: autocannon.Request
}

interface Verdict {
  scenario: string
  'service / stack ceiling': string
  'HTTP ceiling / service': string
  'CPU per request, stack / service': string
  result: string
  'service req/s, durable Redis': number
  'tracing on / off, req/s': string
  'tracing CPU µs/request': string
}

const redis = await startPrivateRedis({ durable: false })
// Where the traced service sends its spans (OTLP/HTTP, the SDK's default encoding and batching).
const otlpSink = await startOtlpSink()
const durableRedis = await startPrivateRedis()
const clients = new Map(
  await Promise.all(
    [redis, durableRedis].map(async (each) => [each, await createClient({ socket: { host: '127.0.0.1', port: each.port } }).connect()] as const),
  ),
)

const scenarios: Scenario[] = [
  { label: 'GET /items/', request: { method: 'GET', path: '/items/' } },
  {
    label: 'POST /items/',
    request: { method: 'POST', path: '/items/', headers: { 'content-type': 'application/json' }, body: JSON.stringify(NEW_ITEM) },
  },
]

try {
  console.log(
    `items-list benchmark: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${MEASURE_SECONDS} s per server ` +
      `(after ${WARMUP_SECONDS} s of warm-up), medians; ceilings and service on a Redis without persistence, ` +
      'the service also on a durable one (appendonly yes, appendfsync always)\n',
  )
  const verdicts: Verdict[] = []
  for (const { label, request } of scenarios) {
    const rounds = new Map<ServerKind, Measurement[]>(KINDS.map((kind) => [kind, []]))
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of KINDS) rounds.get(kind)!.push(await measure(kind, request))
    }
    verdicts.push(report(label, new Map([...rounds].map(([kind, measurements]) => [kind, median(measurements)]))))
  }
  console.log('Summary')
  console.table(Object.fromEntries(verdicts.map(({ scenario, ...rest }) => [scenario, rest])))
} finally {
  for (const client of clients.values()) client.destroy()
  await redis.dispose()
  await durableRedis.dispose()
  await otlpSink.close()
}

function redisOf(kind: ServerKind): PrivateRedis {
  return kind === 'service, durable Redis' ? durableRedis : redis
}

async function measure(kind: ServerKind, request: autocannon.Request): Promise<Measurement> {
  await resetList(redisOf(kind))
  const port = await findFreePort()
  const server = await startServer(kind, port)
  try {
    await load(port, request, WARMUP_SECONDS)
    await resetList(redisOf(kind))
    return await load(port, request, MEASURE_SECONDS, server.child.pid)
  } finally {
    server.child.kill('SIGTERM')
    await server.exited
  }
}

function median(measurements: Measurement[]): Measurement {
  const middle = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  return {
    requestsPerSecond: middle(measurements.map((m) => m.requestsPerSecond)),
    p50: middle(measurements.map((m) => m.p50)),
    p99: middle(measurements.map((m) => m.p99)),
    non2xx: measurements.reduce((sum, m) => sum + m.non2xx, 0),
    cpuMicrosPerRequest: measurements.some((m) => m.cpuMicrosPerRequest === undefined)
      ? undefined
      : middle(measurements.map((m) => m.cpuMicrosPerRequest!)),
  }
}

async function resetList(of: PrivateRedis): Promise<void> {
  const client = clients.get(of)!
  await client.del('items')
  await client.rPush('items', PREFILLED_NAMES)
}

/** Starts `kind` on `port` and resolves once it answers GET /items/; its stdout, the service's log, goes to /dev/null. */
async function startServer(kind: ServerKind, port: number): Promise<RunningProcess> {
  const redisPort = String(redisOf(kind).port)
  const tracing = kind === 'service, tracing on' ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpSink.url } : {}
  const server = kind.startsWith('service')
    ? runServiceSource(SERVICE_ROOT, { PORT: String(port), HOST: '127.0.0.1', SHUTDOWN_DELAY_SECONDS: '0', REDIS_HOST: '127.0.0.1', REDIS_PORT: redisPort, ...tracing }, 'src/server.ts', {
        discardStdout: true,
      })
    : runServiceSource(SERVICE_ROOT, { CEILING: kind === 'http ceiling' ? 'http' : 'stack', PORT: String(port), REDIS_PORT: redisPort }, 'bench/ceiling-server.ts')
  const answers = async () => (await fetch(`http://127.0.0.1:${port}/items/`).catch(() => undefined))?.ok === true
  // 200 polls of 50 ms: a cold start on a busy machine takes a few seconds.
  if (await eventually(async () => server.child.exitCode !== null || (await answers()), 200)) {
    if (server.child.exitCode === null) return server
  }
  server.child.kill('SIGKILL')
  throw new Error(`${kind} did not start:\n${server.output()}`)
}

/** Loads the server on `port` for `seconds`; with `pid`, also what the load cost that process in CPU. */
async function load(port: number, request: autocannon.Request, seconds: number, pid?: number): Promise<Measurement> {
  const cpuBefore = cpuMicros(pid)
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [request],
  })
  const cpuAfter = cpuMicros(pid)
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors,
    cpuMicrosPerRequest:
      cpuBefore === undefined || cpuAfter === undefined || result.requests.total === 0 ? undefined : (cpuAfter - cpuBefore) / result.requests.total,
  }
}

function report(label: string, results: Map<ServerKind, Measurement>): Verdict {
  const http = results.get('http ceiling')!
  const stack = results.get('stack ceiling')!
  const service = results.get('service')!
  const durable = results.get('service, durable Redis')!
  const traced = results.get('service, tracing on')!
  console.log(label)
  console.table(
    Object.fromEntries(
      [...results].map(([kind, m]) => [
        kind,
        {
          'req/s': Math.round(m.requestsPerSecond),
          'p50 ms': m.p50,
          'p99 ms': m.p99,
          'CPU µs/request': m.cpuMicrosPerRequest === undefined ? '' : Math.round(m.cpuMicrosPerRequest),
          'non-2xx/errors': m.non2xx,
        },
      ]),
    ),
  )
  const vsStack = service.requestsPerSecond / stack.requestsPerSecond
  const vsHttp = service.requestsPerSecond / http.requestsPerSecond
  const { headroom, clientBound, line } = loadGeneratorHeadroom({ name: 'HTTP ceiling', requestsPerSecond: http.requestsPerSecond }, service.requestsPerSecond)
  const met = vsStack >= TARGET_VS_STACK
  console.log(`  service / stack ceiling: ${vsStack.toFixed(2)}  (target >= ${TARGET_VS_STACK})${clientBound || met ? '' : '  BELOW TARGET'}`)
  console.log(`  service / HTTP ceiling:  ${vsHttp.toFixed(2)}`)
  console.log(`  ${line}`)
  const byCpu =
    stack.cpuMicrosPerRequest === undefined || service.cpuMicrosPerRequest === undefined
      ? undefined
      : stack.cpuMicrosPerRequest / service.cpuMicrosPerRequest
  if (byCpu !== undefined) {
    console.log(
      `  CPU per request, stack ceiling / service: ${byCpu.toFixed(2)} (the same comparison by cost rather than rate: ` +
        'less swayed by the load generator and by what else runs on the machine)',
    )
  }
  console.log(
    `  on a durable Redis (appendonly yes, appendfsync always) the service answers ${Math.round(durable.requestsPerSecond)} req/s ` +
      '(absolute, not a ratio: an fsync per write would cap the ceilings as much as the service)',
  )
  const tracingRate = traced.requestsPerSecond / service.requestsPerSecond
  const tracingCpu =
    traced.cpuMicrosPerRequest === undefined || service.cpuMicrosPerRequest === undefined ? undefined : traced.cpuMicrosPerRequest - service.cpuMicrosPerRequest
  console.log(
    `  tracing on (spans exported over OTLP/HTTP): ${tracingRate.toFixed(2)} of the service's req/s` +
      `${tracingCpu === undefined ? '' : `, ${tracingCpu >= 0 ? '+' : ''}${Math.round(tracingCpu)} µs of CPU per request`}\n`,
  )
  return {
    scenario: label,
    'service / stack ceiling': `${vsStack.toFixed(2)} (target >= ${TARGET_VS_STACK})`,
    'HTTP ceiling / service': headroom.toFixed(2),
    'CPU per request, stack / service': byCpu === undefined ? '' : byCpu.toFixed(2),
    result: clientBound ? 'CLIENT-BOUND: ratio means nothing' : met ? 'PASS' : 'BELOW TARGET',
    'service req/s, durable Redis': Math.round(durable.requestsPerSecond),
    'tracing on / off, req/s': tracingRate.toFixed(2),
    'tracing CPU µs/request': tracingCpu === undefined ? '' : `${tracingCpu >= 0 ? '+' : ''}${Math.round(tracingCpu)}`,
  }
}
