import t from 'tap'
import { createPrivateRedis } from '@repo/test-support'
import { STORE_COMMANDS } from '../../src/store/metrics.ts'
import { buildService } from '../helpers/service.ts'

const DURATION = 'items_store_command_duration_seconds'

/** Every sample of `name` on the page, as `{labels…}` → value. */
function samples(page: string, name: string): Map<string, number> {
  const found = new Map<string, number>()
  for (const [, labels, value] of page.matchAll(new RegExp(`^${name}(\\{[^}]*\\}) (\\S+)$`, 'gm'))) found.set(labels!, Number(value))
  return found
}

t.test('every command’s series, its counts by outcome and its duration, are on /metrics at 0 before the first command, as alerts and the dashboard read them', async (t) => {
  // Redis not started: the app is up, and no command has been sent.
  const redis = await createPrivateRedis()
  t.teardown(() => redis.dispose())
  const { app } = await buildService(t, { redis, ready: false })
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body

  t.ok(STORE_COMMANDS.length > 0)
  const counted = samples(page, 'items_store_commands_total')
  t.same(new Set(counted.values()), new Set([0]), 'no command yet')
  for (const command of STORE_COMMANDS) {
    for (const outcome of ['ok', 'error', 'timeout']) {
      t.equal(counted.get(`{command="${command}",outcome="${outcome}"}`), 0, `${command}, ${outcome}: counted at 0`)
    }
    t.equal(samples(page, `${DURATION}_count`).get(`{command="${command}"}`), 0, `${command}: _count`)
    t.equal(samples(page, `${DURATION}_sum`).get(`{command="${command}"}`), 0, `${command}: _sum`)
    const buckets = [...samples(page, `${DURATION}_bucket`)].filter(([labels]) => labels.endsWith(`,command="${command}"}`))
    t.same(
      buckets.map(([labels]) => /le="([^"]+)"/.exec(labels)?.[1]),
      ['0.0001', '0.00025', '0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '+Inf'],
      `${command}: every bucket`,
    )
    t.ok(buckets.every(([, value]) => value === 0), `${command}: at 0`)
  }
})

t.test('a command’s duration is in seconds: one that waited out the 500 ms deadline on a frozen Redis is above 0.25', async (t) => {
  const { app, redis } = await buildService(t)
  redis.pause()
  t.teardown(() => redis.resume())
  t.equal((await app.inject({ method: 'GET', url: '/items/' })).statusCode, 503)
  redis.resume()
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body

  // The command the list sent, whatever it is: the one that timed out.
  const timedOut = [...samples(page, 'items_store_commands_total')].filter(([labels, value]) => labels.includes('outcome="timeout"') && value === 1)
  t.equal(timedOut.length, 1, 'one command timed out')
  const command = /command="([^"]+)"/.exec(timedOut[0]?.[0] ?? '')?.[1]
  // In milliseconds it would be past every bucket; in microseconds, in the first.
  t.equal(samples(page, `${DURATION}_bucket`).get(`{le="0.25",command="${command}"}`), 0, 'not under 0.25 s')
  const sum = samples(page, `${DURATION}_sum`).get(`{command="${command}"}`) ?? Number.NaN
  t.ok(sum >= 0.5 && sum < 5, `the deadline's 500 ms is 0.5 s (${sum})`)
})
