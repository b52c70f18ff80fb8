/**
 * pnpm bench: items-list against its two ceilings, in one run, on this machine.
 *
 * One private redis-server, the list reset to the same 100 names before every measurement;
 * then, in turn, the HTTP ceiling (a bare Fastify route answering from memory), the stack
 * ceiling (a bare Fastify route doing the same single Redis command with the same client,
 * configured as the service's; both ceilings send the service's security headers) and the service as `pnpm start` runs it (default configuration:
 * info logging to stdout, one access line per request, request ids, metrics, security headers).
 * Each server runs in its own process; autocannon loads it from this one. The three take
 * turns for several rounds and each figure is the median of its rounds, so that a noisy
 * neighbour on a shared machine moves all three alike instead of skewing one.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import { createClient } from 'redis'
import { startPrivateRedis } from '@repo/test-support'
import { NEW_ITEM, PREFILLED_NAMES } from './names.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const CONNECTIONS = 50
const ROUNDS = 3
const WARMUP_SECONDS = 1
const MEASURE_SECONDS = 5
const PORT = 18_181

interface Measurement {
  requestsPerSecond: number
  p50: number
  p99: number
  non2xx: number
}

type ServerKind = 'http ceiling' | 'stack ceiling' | 'service'

const redis = await startPrivateRedis()
const client = createClient({ socket: { host: '127.0.0.1', port: redis.port } })
await client.connect()

const scenarios = [
  { label: 'GET /items/', request: { method: 'GET' as const, path: '/items/' } },
  {
    label: 'POST /items/',
    request: { method: 'POST' as const, path: '/items/', headers: { 'content-type': 'application/json' }, body: JSON.stringify(NEW_ITEM) },
  },
]
const kinds: ServerKind[] = ['http ceiling', 'stack ceiling', 'service']

try {
  console.log(
    `items-list benchmark: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${MEASURE_SECONDS} s per server ` +
      `(after ${WARMUP_SECONDS} s of warm-up), medians\n`,
  )
  for (const { label, request } of scenarios) {
    const rounds = new Map<ServerKind, Measurement[]>(kinds.map((kind) => [kind, []]))
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of kinds) rounds.get(kind)!.push(await measure(kind, request))
    }
    report(label, new Map([...rounds].map(([kind, measurements]) => [kind, median(measurements)])))
  }
} finally {
  client.destroy()
  await redis.dispose()
}

async function measure(kind: ServerKind, request: autocannon.Request): Promise<Measurement> {
  await resetList()
  const server = await startServer(kind)
  try {
    await load(request, WARMUP_SECONDS)
    await resetList()
    return await load(request, MEASURE_SECONDS)
  } finally {
    server.kill('SIGTERM')
    await once(server, 'exit')
  }
}

function median(measurements: Measurement[]): Measurement {
  const middle = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  return {
    requestsPerSecond: middle(measurements.map((m) => m.requestsPerSecond)),
    p50: middle(measurements.map((m) => m.p50)),
    p99: middle(measurements.map((m) => m.p99)),
    non2xx: measurements.reduce((sum, m) => sum + m.non2xx, 0),
  }
}

async function resetList() {
  await client.del('items')
  await client.rPush('items', PREFILLED_NAMES)
}

async function startServer(kind: ServerKind): Promise<ChildProcess> {
  const args =
    kind === 'service'
      ? ['--conditions=@repo/source', 'src/server.ts']
      : ['--conditions=@repo/source', 'bench/ceiling-server.ts', kind === 'http ceiling' ? 'http' : 'stack', String(PORT), String(redis.port)]
  const env = { PATH: process.env.PATH ?? '', PORT: String(PORT), HOST: '127.0.0.1', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) }
  // Logs go where a container's would: a pipe nobody reads in real time. /dev/null is the cheapest such pipe.
  const server = spawn(process.execPath, args, { cwd: SERVICE_ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] })
  for (let attempt = 0; attempt < 200; attempt++) {
    const res = await fetch(`http://127.0.0.1:${PORT}/items/`).catch(() => undefined)
    if (res?.ok) return server
    await sleep(50)
  }
  server.kill('SIGKILL')
  throw new Error(`${kind} did not start`)
}

async function load(request: autocannon.Request, seconds: number): Promise<Measurement> {
  const result = await autocannon({
    url: `http://127.0.0.1:${PORT}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [request],
  })
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors,
  }
}

function report(label: string, results: Map<ServerKind, Measurement>) {
  const http = results.get('http ceiling')!
  const stack = results.get('stack ceiling')!
  const service = results.get('service')!
  console.log(label)
  console.table(
    Object.fromEntries(
      [...results].map(([kind, m]) => [
        kind,
        { 'req/s': Math.round(m.requestsPerSecond), 'p50 ms': m.p50, 'p99 ms': m.p99, 'non-2xx/errors': m.non2xx },
      ]),
    ),
  )
  const vsStack = service.requestsPerSecond / stack.requestsPerSecond
  const vsHttp = service.requestsPerSecond / http.requestsPerSecond
  console.log(`  service / stack ceiling: ${vsStack.toFixed(2)}  (target >= 0.9)${vsStack >= 0.9 ? '' : '  BELOW TARGET'}`)
  console.log(`  service / HTTP ceiling:  ${vsHttp.toFixed(2)}\n`)
}
