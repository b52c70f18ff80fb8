import { randomUUID } from 'node:crypto'
import { Histogram, Counter, Registry } from 'prom-client'
import { createLogger, withDeadline } from '../src/index.ts'
import { pino } from 'pino'

const N = 200_000
async function time(label: string, fn: () => unknown | Promise<unknown>, async = false) {
  let best = Infinity
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint()
    if (async) for (let i = 0; i < N; i++) await fn()
    else for (let i = 0; i < N; i++) fn()
    const ns = Number(process.hrtime.bigint() - start) / N
    best = Math.min(best, ns)
  }
  console.log(label.padEnd(60), (best / 1000).toFixed(3), 'µs')
}
const dest = pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 })
const logger = createLogger('info', dest)
const registry = new Registry()
const h = new Histogram({ name: 'h', help: 'h', labelNames: ['method', 'route', 'status_code'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry] })
const bound = h.labels({ method: 'GET', route: '/items/', status_code: 200 })
const c = new Counter({ name: 'c', help: 'c', labelNames: ['command', 'outcome'], registers: [registry] })
const cb = c.labels({ command: 'lrange', outcome: 'ok' })
await time('randomUUID', () => randomUUID())
await time('child logger {reqId}', () => logger.child({ reqId: 'abc' }))
const child = logger.child({ reqId: 'abc' })
await time('access line (child.info, 5 fields)', () => child.info({ method: 'GET', url: '/items/', statusCode: 200, remoteAddress: '127.0.0.1', responseTime: 1.234 }, 'request completed'))
await time('histogram.observe(labels object)', () => h.observe({ method: 'GET', route: '/items/', status_code: 200 }, 0.001))
await time('histogram bound .observe', () => bound.observe(0.001))
await time('counter bound .inc', () => cb.inc())
await time('performance.now x2', () => { performance.now(); performance.now() })
const resolved = Promise.resolve(1)
await time('await resolved promise', () => resolved, true)
await time('await withDeadline(resolved)', () => withDeadline(resolved, 500, () => new Error('x')), true)
await time('setTimeout+clearTimeout', () => clearTimeout(setTimeout(() => {}, 500)))
