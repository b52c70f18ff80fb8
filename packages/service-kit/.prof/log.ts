import { pino } from 'pino'
import { createLogger } from '../src/index.ts'
const N = 200_000
const dest = pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 })
const variants = {
  createLogger: createLogger('info', dest),
  'no redact': pino({ level: 'info' }, dest),
  'no redact, no base': pino({ level: 'info', base: undefined }, dest),
}
for (const [label, logger] of Object.entries(variants)) {
  const child = logger.child({ reqId: '0b3f5a2e-3c5e-4a8e-9a51-8d6f1f0f7c11' })
  let best = Infinity
  for (let r = 0; r < 5; r++) { const s = process.hrtime.bigint(); for (let i = 0; i < N; i++) child.info({ method: 'GET', url: '/items/', statusCode: 200, remoteAddress: '127.0.0.1', responseTime: 1.2345678 }, 'request completed'); best = Math.min(best, Number(process.hrtime.bigint() - s) / N) }
  console.log(label.padEnd(24), (best / 1000).toFixed(3), 'µs')
}
