/**
 * pnpm bench:scale: items-list at 10k, 1M and 5M names of 16 bytes, against the stack ceiling
 * (bench/ceiling.ts's naive routes: one `LRANGE 0 -1`, `RPUSH` or `LREM` of a plain Redis list,
 * the way an earlier version kept the list), in one run. For each size, on a private redis-server
 * without persistence:
 *
 * - the full `GET /items/`, service and ceiling in turn, ROUNDS times each (medians), read with
 *   nothing else going on: time to the first byte and to the last, the server's memory growth
 *   (resident, from /proc), the longest Redis stall (bench/pinger.ts: a PING every 2 ms on a
 *   connection of its own); then read again while other clients use the server: GET / from
 *   OTHER_CLIENTS connections (their p99) and appends (how many answered 201), and the stall;
 * - DELETE of a name at the list's end and of one not in it: time and longest stall;
 * - the service's move of the list an earlier version wrote into chunks, at its start: time and
 *   longest stall; and Redis's memory per name in each layout.
 *
 * Both answers are checked equal first (SHA-256 of the body, read with nothing else going on). Usage:
 *   node bench/scale.ts [--sizes=10000,1000000,5000000] [--service-dir=<a checkout's services/items-list> --earlier]
 * `--earlier` runs a version that keeps the plain list (no move into chunks), for the figures before.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { Agent, request, type IncomingMessage } from 'node:http'
import { loadavg } from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createClient } from 'redis'
import { eventually, findFreePort, runServiceSource, startPrivateRedis } from '@repo/test-support'

const BENCH_ROOT = fileURLToPath(new URL('..', import.meta.url))
const { values: options } = parseArgs({
  options: { sizes: { type: 'string', default: '10000,1000000,5000000' }, 'service-dir': { type: 'string' }, earlier: { type: 'boolean', default: false } },
})
const SIZES = options.sizes.split(',').map(Number)
const SERVICE_ROOT = options['service-dir'] ?? BENCH_ROOT
const ROUNDS = 3
/** Connections asking GET / in a loop while the list is read: the service's other clients. */
const OTHER_CLIENTS = 4
const nameAt = (index: number): string => `s-${String(index).padStart(14, '0')}`
type Inspector = Awaited<ReturnType<typeof connectInspector>>
const connectInspector = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect()

interface Server {
  url: string
  pid: number
  child: ChildProcess
}

interface Read {
  status: number
  firstByteMs: number
  totalMs: number
  rssGrowthMb: number
  stallMs: number
  /** Read again, beside other clients. */
  busyTotalMs: number
  busyStallMs: number
  othersP99Ms: number
  appended: string
}

const running: ChildProcess[] = []
console.log(`items-list bench:scale (load average ${loadavg()[0]!.toFixed(1)}), service from ${SERVICE_ROOT}${options.earlier ? ' (an earlier version)' : ''}\n`)
try {
  for (const size of SIZES) await measureSize(size)
} finally {
  for (const child of running) child.kill('SIGKILL')
}

async function measureSize(size: number): Promise<void> {
  const redis = await startPrivateRedis({ durable: false })
  const inspector = await connectInspector(redis.port)
  const pinger = startPinger(redis.port)
  try {
    const baseline = await usedMemory(inspector)
    await writeNames(inspector, 'naive', size)
    const naiveBytes = (await usedMemory(inspector)) - baseline
    // The service's list as an earlier version wrote it: the service moves it into chunks at its start.
    await writeNames(inspector, 'items', size)
    await pinger.longest()
    const started = performance.now()
    const service = await startServer(SERVICE_ROOT, 'src/server.ts', {
      REDIS_HOST: '127.0.0.1',
      REDIS_PORT: String(redis.port),
      ITEMS_MAX_COUNT: String(2 * size + 100_000),
      SHUTDOWN_DELAY_SECONDS: '0',
    })
    let moved = 'no move (an earlier version)'
    let layoutBytes = naiveBytes
    if (!options.earlier) {
      if (!(await eventually(async () => (await inspector.exists('items:legacy')) === 0 && (await inspector.type('items')) === 'zset', 1200))) throw new Error('the list was never moved into chunks')
      moved = `${Math.round(performance.now() - started)} ms from the start of the process, longest stall ${(await pinger.longest()).toFixed(1)} ms`
      layoutBytes = (await usedMemory(inspector)) - baseline - naiveBytes
    }
    const headers = await answerHeaders(service)
    const ceiling = await startServer(BENCH_ROOT, 'bench/ceiling.ts', { REDIS_PORT: String(redis.port), HEADERS: JSON.stringify(headers) })

    // The same answer, read while nothing else happens (appends made during a read may or may not be in it).
    const [ownAnswer, bareAnswer] = [await exchange(service.url, '/items/', 'GET', new Agent(), undefined, true), await exchange(ceiling.url, '/naive/', 'GET', new Agent(), undefined, true)]
    // An earlier version may not answer a long list at all (its 503 is a figure, not a mistake).
    if (ownAnswer.status === 200 && ownAnswer.sha !== bareAnswer.sha) throw new Error(`at ${size}: the service answered ${ownAnswer.bytes} bytes, the ceiling ${bareAnswer.bytes}: not the same list`)

    const own: Read[] = []
    const bare: Read[] = []
    for (let round = 0; round < ROUNDS; round++) {
      // Each round starts with the other side.
      const sides = [() => readAll(service, '/items/', '/items/', pinger, own), () => readAll(ceiling, '/naive/', '/naive/', pinger, bare)]
      for (const side of round % 2 === 0 ? sides : sides.reverse()) await side()
    }

    const deletes = {
      service: [await remove(service, `/items/${nameAt(size - 1)}`, pinger), await remove(service, '/items/absent', pinger)],
      ceiling: [await remove(ceiling, `/naive/${nameAt(size - 1)}`, pinger), await remove(ceiling, '/naive/absent', pinger)],
    }

    console.log(`${size.toLocaleString('en')} names (${(bareAnswer.bytes / 1e6).toFixed(1)} MB answered; Redis memory per name: ${(naiveBytes / size).toFixed(1)} B as a plain list, ${(layoutBytes / size).toFixed(1)} B in chunks)`)
    console.log(`  move into chunks: ${moved}`)
    console.table({ service: medians(own), ceiling: medians(bare) })
    console.table(Object.fromEntries(Object.entries(deletes).map(([side, [present, absent]]) => [side, { 'DELETE at the end': present, 'DELETE of a name not in it': absent }])))
    console.log(`  full GET, service / ceiling, time: ${(medianOf(own, 'totalMs') / medianOf(bare, 'totalMs')).toFixed(2)} (target <= 1)\n`)
  } finally {
    pinger.stop()
    inspector.destroy()
    for (const child of running.splice(0)) child.kill('SIGKILL')
    await redis.dispose()
  }
}

/** `size` names, `nameAt(0)` on, at the end of the plain list at `key`: a thousand a command. */
async function writeNames(inspector: Inspector, key: string, size: number): Promise<void> {
  for (let start = 0; start < size; start += 100_000) {
    const pushes = []
    for (let from = start; from < Math.min(size, start + 100_000); from += 1000) {
      pushes.push(inspector.rPush(key, Array.from({ length: Math.min(1000, size - from) }, (_, index) => nameAt(from + index))))
    }
    await Promise.all(pushes)
  }
}

async function usedMemory(inspector: Inspector): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await inspector.info('memory'))?.[1])
}

/** The headers of the service's answers that are the same for every request, for the ceiling to send. */
async function answerHeaders(service: Server): Promise<Record<'GET' | 'POST', Record<string, string>>> {
  const perRequest = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'x-request-id', 'link'])
  const kept = (response: Response) => Object.fromEntries([...response.headers].filter(([name]) => !perRequest.has(name)))
  const get = await fetch(`${service.url}/items/?limit=1`)
  const post = await fetch(`${service.url}/items/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"header check"}' })
  await fetch(`${service.url}/items/header%20check`, { method: 'DELETE' })
  return { GET: kept(get), POST: kept(post) }
}

/** One full read of `path` alone, then one while other clients use the server; pushed onto `reads`. */
async function readAll(server: Server, path: string, appendPath: string, pinger: Pinger, reads: Read[]): Promise<void> {
  await pinger.longest()
  const rssBefore = residentMb(server.pid)
  let rssPeak = rssBefore
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, residentMb(server.pid))), 10)
  const sent = performance.now()
  const alone = await exchange(server.url, path, 'GET', new Agent())
  clearInterval(sampler)
  const stallMs = await pinger.longest()
  const busy = await readBeside(server, path, appendPath, reads.length)
  reads.push({
    status: alone.status,
    firstByteMs: alone.firstByteAt - sent,
    totalMs: alone.endAt - sent,
    rssGrowthMb: rssPeak - rssBefore,
    stallMs,
    ...busy,
    busyStallMs: await pinger.longest(),
  })
}

/**
 * One full read of `path` while OTHER_CLIENTS connections ask for GET / in a loop and one more
 * appends through `appendPath`: what the others meet meanwhile.
 */
async function readBeside(server: Server, path: string, appendPath: string, round: number): Promise<{ busyTotalMs: number; othersP99Ms: number; appended: string }> {
  const agent = new Agent({ keepAlive: true })
  let reading = true
  const latencies: number[] = []
  const appends = { ok: 0, total: 0 }
  const others = Array.from({ length: OTHER_CLIENTS }, async () => {
    while (reading) {
      const sent = performance.now()
      await exchange(server.url, '/', 'GET', agent)
      latencies.push(performance.now() - sent)
    }
  })
  const appender = (async () => {
    for (let index = 0; reading; index++) {
      const { status } = await exchange(server.url, appendPath, 'POST', agent, JSON.stringify({ name: `during ${round}.${index}` }))
      appends.total++
      if (status === 201) appends.ok++
    }
  })()
  const sent = performance.now()
  const answer = await exchange(server.url, path, 'GET', agent)
  reading = false
  await Promise.all([...others, appender])
  agent.destroy()
  latencies.sort((a, b) => a - b)
  return {
    busyTotalMs: answer.endAt - sent,
    othersP99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? Number.NaN,
    appended: `${appends.ok}/${appends.total}`,
  }
}

/** DELETE `path`: its status, time and the longest Redis stall meanwhile. */
async function remove(server: Server, path: string, pinger: Pinger): Promise<string> {
  await pinger.longest()
  const sent = performance.now()
  const { status, endAt } = await exchange(server.url, path, 'DELETE', new Agent())
  return `${status} in ${Math.round(endAt - sent)} ms, stall ${(await pinger.longest()).toFixed(1)} ms`
}

interface Exchange {
  status: number
  bytes: number
  sha: string
  firstByteAt: number
  endAt: number
}

/** One request; its body counted (and hashed when `hash`), never held. */
async function exchange(url: string, path: string, method: string, agent: Agent, body?: string, hash = false): Promise<Exchange> {
  const req = request(`${url}${path}`, { method, agent, headers: body === undefined ? {} : { 'content-type': 'application/json' } })
  req.end(body)
  const [res] = (await once(req, 'response')) as [IncomingMessage]
  const digest = createHash('sha256')
  let bytes = 0
  let firstByteAt = Number.NaN
  res.on('data', (chunk: Buffer) => {
    if (bytes === 0) firstByteAt = performance.now()
    bytes += chunk.length
    if (hash) digest.update(chunk)
  })
  await once(res, 'end')
  return { status: res.statusCode ?? 0, bytes, sha: digest.digest('hex'), firstByteAt, endAt: performance.now() }
}

async function startServer(root: string, entry: string, env: Record<string, string>): Promise<Server> {
  const port = String(await findFreePort())
  const started = runServiceSource(root, { PORT: port, HOST: '127.0.0.1', ...env }, entry, { discardStdout: true })
  running.push(started.child)
  const url = `http://127.0.0.1:${port}`
  if (!(await eventually(async () => started.child.exitCode !== null || (await fetch(`${url}/`).catch(() => undefined))?.ok === true, 600)) || started.child.exitCode !== null) {
    throw new Error(`${entry} did not start:\n${started.output()}`)
  }
  return { url, pid: started.child.pid!, child: started.child }
}

function residentMb(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
}

interface Pinger {
  /** The longest PING round trip since the last call, in ms. */
  longest(): Promise<number>
  stop(): void
}

function startPinger(port: number): Pinger {
  const child = spawn(process.execPath, [fileURLToPath(new URL('pinger.ts', import.meta.url))], { env: { REDIS_PORT: String(port) }, stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  return {
    async longest() {
      child.stdin.write('\n')
      return Number((await lines.next()).value)
    },
    stop: () => child.kill(),
  }
}

function medianOf(reads: Read[], field: 'firstByteMs' | 'totalMs' | 'rssGrowthMb' | 'stallMs' | 'busyTotalMs' | 'busyStallMs' | 'othersP99Ms'): number {
  const sorted = reads.map((read) => read[field]).sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

function medians(reads: Read[]) {
  const rounded = (field: Parameters<typeof medianOf>[1]) => Math.round(medianOf(reads, field) * 10) / 10
  return {
    status: reads.map((read) => read.status).join(' '),
    'first byte, ms': rounded('firstByteMs'),
    'whole answer, ms': rounded('totalMs'),
    'memory growth, MB': rounded('rssGrowthMb'),
    'longest Redis stall, ms': rounded('stallMs'),
    'beside others: whole answer, ms': rounded('busyTotalMs'),
    'their GET / p99, ms': rounded('othersP99Ms'),
    'their appends 201': reads.map((read) => read.appended).join(' '),
    'longest stall, ms': rounded('busyStallMs'),
  }
}
