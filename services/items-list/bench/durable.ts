/**
 * pnpm bench:durable: appends that are answered only once a replica holds them
 * (`ITEMS_MIN_REPLICAS_ACK=1`), against a primary that fsyncs every write and one replica, as a
 * production deployment with replica acknowledgements runs. 16 connections send POST /items/,
 * one request at a time each, for `--seconds`, `--runs` times; printed: each run's appends per
 * second and the median. A run with an answer other than 201 (a 503: the replica fell behind)
 * fails the benchmark (exit code 1).
 *
 * Here the disk sets the pace, not the service: this is no ratio to a ceiling, but the figure to
 * hold when the append changes. `--service=<dir>` measures another checkout's items-list (its
 * `services/items-list` folder, dependencies installed) on the same Redis set-up, so that two
 * versions are compared on one machine in one sitting.
 *
 * Usage: node bench/durable.ts [--seconds=5] [--runs=3] [--service=<dir>]
 */
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createClient } from 'redis'
import { eventually, findFreePort, loadFor, runServiceSource, startPrivateRedis } from '@repo/test-support'
import { groupSizes } from './group-sizes.ts'

const { values: options } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, runs: { type: 'string', default: '3' }, service: { type: 'string' } },
})
const SERVICE_ROOT = options.service === undefined ? fileURLToPath(new URL('..', import.meta.url)) : resolve(options.service)
const CONNECTIONS = 16
const APPEND = { method: 'POST' as const, path: '/items/', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'durable item' }) }

const primary = await startPrivateRedis()
const replica = await startPrivateRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })
const inspector = await createClient({ socket: { host: '127.0.0.1', port: primary.port } }).connect()
let service: ReturnType<typeof runServiceSource> | undefined
try {
  if (!(await eventually(async () => /slave0:.*state=online/.test(await inspector.info('replication')), 200))) throw new Error('the replica did not come online')
  const port = await findFreePort()
  const url = `http://127.0.0.1:${port}`
  service = runServiceSource(
    SERVICE_ROOT,
    { PORT: String(port), HOST: '127.0.0.1', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(primary.port), ITEMS_MIN_REPLICAS_ACK: '1', SHUTDOWN_DELAY_SECONDS: '0' },
    'src/server.ts',
    { discardStdout: true },
  )
  const ready = async () => (await fetch(`${url}/ready`).catch(() => undefined))?.ok === true
  if (!(await eventually(ready, 200))) throw new Error(`the service at ${SERVICE_ROOT} did not become ready:\n${service.output()}`)

  console.log(`items-list durable appends (${SERVICE_ROOT}, load average ${load()}): ITEMS_MIN_REPLICAS_ACK=1, a primary with appendfsync always and one replica, ${CONNECTIONS} connections, ${options.runs} runs of ${options.seconds} s after 1 s to warm up`)
  await loadFor(url, [APPEND], CONNECTIONS, 1)
  const rates: number[] = []
  for (let run = 1; run <= Number(options.runs); run++) {
    rates.push(await loadFor(url, [APPEND], CONNECTIONS, Number(options.seconds)))
    console.log(`  run ${run}: ${Math.round(rates.at(-1)!)} appends/s, every one answered 201`)
  }
  const median = [...rates].sort((a, b) => a - b)[Math.floor(rates.length / 2)]!
  console.log(`  median: ${Math.round(median)} appends/s; the list now holds ${await inspector.hGet('items:header', 'count')} names (load average ${load()})`)
  console.log(`  appends per script call: ${await groupSizes(url)}`)
} finally {
  service?.child.kill('SIGKILL')
  inspector.destroy()
  await replica.dispose()
  await primary.dispose()
}

function load(): string {
  return loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')
}
