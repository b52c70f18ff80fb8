import t, { type Test } from 'tap'
import { createClient } from 'redis'
import { composeRedisFlags, eventually, LENIENT_REDIS_DEADLINE_MS, startRedisWithServiceUsers, TEST_REDIS_ADMIN, TEST_REDIS_USERS, type PrivateRedis } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

// Every append answered 201 is still in the list, once, after the durable Redis restarts, as
// compose and the Kubernetes base run it: the ACL file as render-acl.sh renders it, loaded with
// `--aclfile`, and compose's own flags (AOF, fsync on every write, no eviction).

const { itemsList } = TEST_REDIS_USERS
const AS_ITEMS_LIST = { REDIS_USERNAME: itemsList.username, REDIS_PASSWORD: itemsList.password }

type Service = Awaited<ReturnType<typeof buildService>>

/** The names one batch appended, by kind. */
interface Batch {
  plain: string[]
  /** Appended with an Idempotency-Key (its own name), then retried with it and replayed. */
  once: string[]
}

/** Appends of every kind, each answered 201: plain, with an Idempotency-Key, and the replayed retry of each keyed one. */
async function appendEveryKind(t: Test, { app }: Service, label: string, count = 5): Promise<Batch> {
  const batch: Batch = { plain: [], once: [] }
  const post = (name: string, key?: string) =>
    app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })
  for (let index = 0; index < count; index++) {
    const plain = `${label} plain ${index}`
    const once = `${label} once ${index}`
    t.equal((await post(plain)).statusCode, 201, plain)
    t.equal((await post(once, once)).statusCode, 201, once)
    const retry = await post(once, once)
    t.equal(retry.statusCode, 201)
    t.equal(retry.headers['idempotent-replayed'], 'true', `${once}, retried`)
    batch.plain.push(plain)
    batch.once.push(once)
  }
  return batch
}

/** How many times each name is in the list. */
async function countsOf({ storedItems }: Service): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  for (const name of await storedItems()) counts.set(name, (counts.get(name) ?? 0) + 1)
  return counts
}

/**
 * Every appended name is in the list exactly once after the restart, and every keyed one is
 * still remembered: retried again, it is replayed and appends nothing.
 */
async function checkKeptOnce(t: Test, service: Service, batches: Batch[], way: string) {
  const names = batches.flatMap(({ plain, once }) => [...plain, ...once])
  const counts = await countsOf(service)
  t.same(
    names.filter((name) => counts.get(name) !== 1),
    [],
    'every name answered 201 is in the list exactly once',
  )
  for (const name of batches.flatMap(({ once }) => once)) {
    const retry = await service.app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: { 'idempotency-key': name } })
    t.equal(retry.headers['idempotent-replayed'], 'true', `${name}: its key survived the restart`)
  }
  t.equal((await service.storedItems()).length, names.length, 'the retries after the restart appended nothing')
  t.comment(`${way}: ${names.length} names answered 201; ${[...counts.values()].reduce((sum, n) => sum + n, 0)} in the list after the restart`)
}

/** The durable Redis as compose runs it, plus `args`, and the real items-list on it as its ACL user. */
async function serviceOnDurableRedis(t: Test, args: string[] = []) {
  const redis = await startRedisWithServiceUsers({ args: [...(await composeRedisFlags('redis')), ...args] })
  t.teardown(() => redis.dispose())
  // What survives is the subject, not time: fsync on every write goes at the pace of a disk the
  // machine's other jobs share, past production's deadline.
  const service = await buildService(t, { redis, env: { ...AS_ITEMS_LIST, REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) } })
  return { redis, service }
}

async function restart(redis: PrivateRedis, service: Service, signal: 'SIGTERM' | 'SIGKILL') {
  await redis.stop(signal)
  await redis.start()
  await service.untilReady()
}

t.test('appends of every kind survive a SIGTERM and a start of the durable Redis', async (t) => {
  const { redis, service } = await serviceOnDurableRedis(t)
  const batch = await appendEveryKind(t, service, 'sigterm')
  t.equal((await service.storedItems()).length, 10, 'in the list before the restart')
  await restart(redis, service, 'SIGTERM')
  await checkKeptOnce(t, service, [batch], 'SIGTERM and start')
})

t.test('appends of every kind survive a SIGKILL of the durable Redis right after the last 201', async (t) => {
  const { redis, service } = await serviceOnDurableRedis(t)
  const batch = await appendEveryKind(t, service, 'sigkill')
  // No await between the last 201 and the kill: nothing gets time to reach the disk after the answer.
  await restart(redis, service, 'SIGKILL')
  await checkKeptOnce(t, service, [batch], 'SIGKILL right after a 201')
})

t.test('appends of every kind, before and after an AOF rewrite, survive a restart of the durable Redis', async (t) => {
  // A rewrite as soon as the file doubles past a few hundred bytes, started by Redis itself:
  // the appends before it end up in the rewritten base, those after it in the incremental file.
  const { redis, service } = await serviceOnDurableRedis(t, ['--auto-aof-rewrite-min-size', '512'])
  const admin = await createClient({ socket: { host: '127.0.0.1', port: redis.port, reconnectStrategy: 50 }, ...TEST_REDIS_ADMIN }).on('error', () => {}).connect()
  t.teardown(() => admin.destroy())
  /** AOF rewrites completed so far; NaN while one is running or scheduled. */
  const rewrites = async () => {
    const info = await admin.info('persistence')
    const field = (name: string) => new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1]
    return field('aof_rewrite_in_progress') === '0' && field('aof_rewrite_scheduled') === '0' ? Number(field('aof_rewrites')) : Number.NaN
  }

  const before = await appendEveryKind(t, service, 'before rewrite', 10)
  t.ok(await eventually(async () => (await rewrites()) >= 1), 'Redis rewrote its append-only file')
  // No rewrite after that one: the base's size depends on when it started, and the appends after
  // it could otherwise double the file again and be rewritten too, on a busy machine's timing.
  await admin.configSet('auto-aof-rewrite-percentage', '0')
  const rewritten = await rewrites()
  const after = await appendEveryKind(t, service, 'after rewrite', 2)
  t.equal(await rewrites(), rewritten, 'the later appends are in the incremental file, not rewritten yet')

  await restart(redis, service, 'SIGKILL')
  await checkKeptOnce(t, service, [before, after], 'after an AOF rewrite, SIGKILL and start')
})
