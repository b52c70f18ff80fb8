import t from 'tap'
import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { createClient } from 'redis'
import { LISTENING, eventually, runServiceSource } from '@repo/test-support'
import { listKeys } from '../../src/store/layout.ts'
import { ITEM_STORE_SCRIPTS } from '../../src/store/scripts.ts'
import { buildService, nameAt, writeEarlierList } from '../helpers/service.ts'

// A delete of a long list takes many steps and holds a lock (a lease) on the name between them. A
// replica paused past the lease (a long GC, a frozen container) must not report, on waking, a
// removal that another delete may have answered for meanwhile: of concurrent deletes of one name,
// at most one answers 200.

const MILLION = 1_000_000
const { app, redis, inspector, storedItems } = await buildService(t, { env: { ITEMS_MAX_COUNT: String(2 * MILLION) } })
const keys = listKeys('items')
const lockOf = (name: string) => keys.deleting(createHash('sha256').update(name).digest('base64url'))

/** A client with the store's own scripts: to drive a delete's steps one at a time, as a replica would. */
const stepper = createClient({ socket: { host: '127.0.0.1', port: redis.port }, scripts: ITEM_STORE_SCRIPTS })
await stepper.connect()
t.teardown(() => stepper.destroy())

/**
 * Runs `change` atomically on the name's lock as soon as a delete holds it (between two of its
 * steps), and resolves to what it returned: Redis runs scripts one at a time, so the delete's
 * next step sees the change.
 */
async function onceHeld(name: string, change: string): Promise<unknown> {
  const script = `if redis.call('EXISTS', KEYS[1]) == 0 then return false end ${change}`
  for (;;) {
    const seen = await inspector.eval(script, { keys: [lockOf(name)] })
    if (seen !== null) return seen
  }
}

t.test('a delete step that finds its lease expired does nothing and answers lost, so only the delete that ran meanwhile reports the name', async (t) => {
  for (let index = 0; index < 3_000; index++) await app.itemStore.append(index % 1_500 === 0 ? 'doomed' : nameAt(index))
  // Its first step takes the lease (200 ms, by Redis's clock) and gets no further.
  const first = await stepper.removeStep(keys, 'unused', lockOf('doomed'), 'doomed', 'paused delete', 0, 0, 200, false)
  t.match(first, { state: 'more' })
  await sleep(400)

  const meanwhile = await app.inject({ method: 'DELETE', url: '/items/doomed' })
  t.equal(meanwhile.statusCode, 200, 'the lease expired: another delete runs')
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'doomed' } })).statusCode, 201, 'and the name is appended again')

  const woken = await stepper.removeStep(keys, 'unused', lockOf('doomed'), 'doomed', 'paused delete', 0, 3_000, 200, true)
  t.same(woken, { state: 'lost' })
  t.same((await storedItems()).filter((name) => name === 'doomed'), ['doomed'], 'the name appended after the other 200 is kept')
})

t.test('each step of a delete renews its lock: a delete whose steps each come in time keeps it however long it runs in all', async (t) => {
  for (let index = 0; index < 3_000; index++) await app.itemStore.append(index % 1_500 === 0 ? 'doomed' : nameAt(index))
  const lock = lockOf('doomed')
  // A lock of 1.5 s, steps 250 ms apart for 4 s: a step that did not renew it would find it gone.
  // Each step's budget is nil: it renews the lock and gets no further.
  t.match(await stepper.removeStep(keys, 'unused', lock, 'doomed', 'slow delete', 0, 0, 1_500, false), { state: 'more' })
  for (const started = performance.now(); performance.now() - started < 4_000; ) {
    await sleep(250)
    t.match(await stepper.removeStep(keys, 'unused', lock, 'doomed', 'slow delete', 0, 0, 1_500, true), { state: 'more' })
  }
  t.equal(await inspector.get(lock), 'slow delete', 'still its own')
  t.same(await stepper.removeStep(keys, 'unused', lock, 'doomed', 'slow delete', 0, 1_000_000, 1_500, true), { state: 'done', removed: 2 })
  t.equal(await inspector.exists(lock), 0, 'let go of when done')
})

t.test('a DELETE whose lock another delete took over answers 503 (outcome unknown), and a retry answers for the name', async (t) => {
  await writeEarlierList(inspector, 'items', MILLION)
  await app.itemStore.migrate()
  await app.itemStore.append('doomed')
  const deleting = app.inject({ method: 'DELETE', url: '/items/doomed' })
  await onceHeld('doomed', `redis.call('SET', KEYS[1], 'another delete', 'PX', 60000) return 1`)

  const res = await deleting
  t.equal(res.statusCode, 503)
  t.same(res.json(), { detail: 'The delete was interrupted and its outcome is unknown: retry it' })
  t.same((await storedItems()).slice(-1), ['doomed'], 'it removed nothing after losing its lock')
  await inspector.del(lockOf('doomed'))
  t.equal((await app.inject({ method: 'DELETE', url: '/items/doomed' })).statusCode, 200)
  t.equal((await app.inject({ method: 'DELETE', url: '/items/doomed' })).statusCode, 404)
})

t.test('the delete lock always expires: a delete cut short cannot leave its name undeletable', async (t) => {
  await writeEarlierList(inspector, 'items', MILLION)
  await app.itemStore.migrate()
  const deleting = app.inject({ method: 'DELETE', url: `/items/${nameAt(MILLION - 1)}` })
  const ttl = Number(await onceHeld(nameAt(MILLION - 1), `return redis.call('PTTL', KEYS[1])`))
  t.ok(ttl > 0 && ttl <= 5_000, `the lock held mid-delete expires in ${ttl} ms`)
  t.equal((await deleting).statusCode, 200)
  t.same(await inspector.keys('items:deleting:*'), [], 'and the delete let go of it when done')
})

t.test('a replica frozen (SIGSTOP) mid-delete past its lock: of its DELETE and another replica’s, at most one answers 200, and a name appended after that 200 is kept', async (t) => {
  await writeEarlierList(inspector, 'items', MILLION)
  await app.itemStore.migrate()
  await app.itemStore.append('doomed')
  const frozen = runServiceSource(fileURLToPath(new URL('../..', import.meta.url)), {
    HOST: '127.0.0.1',
    PORT: '0',
    REDIS_HOST: '127.0.0.1',
    REDIS_PORT: String(redis.port),
    ITEMS_MAX_COUNT: String(2 * MILLION),
    SHUTDOWN_DELAY_SECONDS: '0',
  })
  t.teardown(() => {
    frozen.child.kill('SIGCONT')
    frozen.child.kill('SIGKILL')
  })
  const [, port] = await frozen.waitFor(LISTENING)

  const first = fetch(`http://127.0.0.1:${port}/items/doomed`, { method: 'DELETE' })
  // Frozen between two of its steps, holding the lock.
  await onceHeld('doomed', `return 1`)
  frozen.child.kill('SIGSTOP')
  t.ok(await eventually(async () => (await inspector.exists(lockOf('doomed'))) === 0, 200), 'its lock expired')

  const meanwhile = await app.inject({ method: 'DELETE', url: '/items/doomed' })
  t.equal(meanwhile.statusCode, 200, 'the other replica deletes the name')
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'doomed' } })).statusCode, 201, 'and it is appended again')
  frozen.child.kill('SIGCONT')
  const woken = await first
  t.equal(woken.status, 503, 'the frozen replica does not answer 200 as well')
  t.same(await woken.json(), { detail: 'The delete was interrupted and its outcome is unknown: retry it' })
  t.same((await storedItems()).slice(-1), ['doomed'], 'the name appended after the 200 is kept')
})
