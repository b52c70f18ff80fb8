import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventually } from '@repo/test-support'
import { buildService, type ServiceUnderTest } from '../helpers/service.ts'

// Group commit (docs/list.md, "Appends in groups"): an append that finds no group out goes at
// once, alone; the appends that arrive meanwhile go together as the next group, one script call,
// each answered on its own. What one group's script answers is append-script.test.ts's.

/** `items_store_append_group_size`'s count and sum, from the app's /metrics. */
async function groupSizes(app: ServiceUnderTest['app']): Promise<{ groups: number; appends: number; alone: number }> {
  const page = (await app.inject({ method: 'GET', url: '/metrics' })).body
  const figure = (pattern: string) => Number(new RegExp(`^items_store_append_group_size${pattern} (\\d+)$`, 'm').exec(page)?.[1])
  return { groups: figure('_count'), appends: figure('_sum'), alone: figure('_bucket\\{le="1"\\}') }
}

t.test('appends asked while one is out go as one group, in arrival order; a lone append goes at once, alone', async (t) => {
  const { app, storedItems } = await buildService(t)
  const before = await groupSizes(app)
  await app.itemStore.append('alone')
  const names = Array.from({ length: 10 }, (_, index) => `name ${index}`)
  t.same(await Promise.all(names.map((name) => app.itemStore.append(name))), names.map(() => 'appended'))
  const after = await groupSizes(app)
  t.same(
    { groups: after.groups - before.groups, appends: after.appends - before.appends, alone: after.alone - before.alone },
    { groups: 3, appends: 11, alone: 2 },
    'the lone append and the first of the ten alone, the nine others together',
  )
  t.same(await storedItems(), ['alone', ...names])
})

t.test('a group holds at most 128 appends: a full group waiting goes at once, beside the groups out', async (t) => {
  const { app, storedItems } = await buildService(t)
  const before = await groupSizes(app)
  const names = Array.from({ length: 300 }, (_, index) => `name ${index}`)
  await Promise.all(names.map((name) => app.itemStore.append(name)))
  const after = await groupSizes(app)
  t.same({ groups: after.groups - before.groups, appends: after.appends - before.appends }, { groups: 4, appends: 300 }, '1, 128, 128, then the 43 left')
  t.same(await storedItems(), names, 'in arrival order across groups')
})

t.test('a group holds at most 64 KB of names: the append that would pass it waits for the next group', async (t) => {
  const { app, storedItems } = await buildService(t)
  const before = await groupSizes(app)
  // 65 names of 1,000 bytes fit; the 1,024 bytes after them do not, and fill the waiting past 64 KB.
  const names = ['alone', ...Array.from({ length: 65 }, (_, index) => `${index}`.padEnd(1_000, '.')), 'x'.repeat(1_024)]
  await Promise.all(names.map((name) => app.itemStore.append(name)))
  const after = await groupSizes(app)
  t.same({ groups: after.groups - before.groups, alone: after.alone - before.alone }, { groups: 3, alone: 2 }, 'alone, 65 together, then the long one')
  t.same(await storedItems(), names)
})

t.test('in a group, replays, conflicts and appends refused at the cap are each answered in their place', async (t) => {
  const { app, storedItems } = await buildService(t, { env: { ITEMS_MAX_COUNT: '3' } })
  t.equal(await app.itemStore.appendOnce('kept', 'k-kept'), 'appended')
  const outcomes = await Promise.all([
    app.itemStore.append('lead'),
    app.itemStore.appendOnce('kept', 'k-kept'),
    app.itemStore.appendOnce('x', 'k-x'),
    app.itemStore.appendOnce('other', 'k-kept'),
    app.itemStore.append('y'),
    app.itemStore.appendOnce('x', 'k-x'),
    app.itemStore.append('z'),
  ])
  t.same(outcomes, ['appended', 'replayed', 'appended', 'conflict', 'full', 'replayed', 'full'])
  t.same(await storedItems(), ['kept', 'lead', 'x'], 'as many as the cap allows, in order')
})

t.test('over HTTP, a group refused whole (a chunk it would open is already there) answers 503 to each of its appends and stores none of them', async (t) => {
  const { app, inspector, storedItems } = await buildService(t)
  for (let first = 0; first < 998; first += 100) await Promise.all(Array.from({ length: Math.min(100, 998 - first) }, (_, offset) => app.itemStore.append(`name ${first + offset}`)))
  await inspector.set('items:chunk:2', 'not a chunk')
  const names = ['fits', 'a', 'b', 'c', 'd']
  const answers = await Promise.all(names.map((name) => app.inject({ method: 'POST', url: '/items/', payload: { name } })))
  t.same(
    answers.map((answer) => answer.statusCode),
    [201, 503, 503, 503, 503],
    'the first alone, into chunk 1; the group after it would open chunk 2',
  )
  t.match(answers[1]!.json(), { detail: /^Item store inconsistent: chunk 2 is there already, past the last chunk 1/ })
  t.same((await storedItems()).slice(-2), ['name 997', 'fits'], 'none of the refused group stored')
  t.equal(await inspector.hGet('items:header', 'count'), '999')
})

t.test('Redis killed (SIGKILL) mid-group under concurrent appends: every 201 is stored once, every 503 retried with its key ends stored once', async (t) => {
  const { app, redis, storedItems } = await buildService(t, { durable: true })
  const answered = new Map<string, number[]>()
  const post = async (name: string, key?: string) => {
    const res = await app.inject({ method: 'POST', url: '/items/', payload: { name }, headers: key === undefined ? {} : { 'idempotency-key': key } })
    answered.set(name, [...(answered.get(name) ?? []), res.statusCode])
    return res.statusCode
  }
  let acknowledged = 0
  /** As the README asks: one key per name, the same key on every retry of a 503. */
  async function appendRetrying(name: string): Promise<void> {
    for (let attempt = 0; attempt < 300; attempt++) {
      if ((await post(name, `key-${name}`)) === 201) return void acknowledged++
      await sleep(10)
    }
    throw new Error(`${name} was never acknowledged`)
  }
  const keyed = Array.from({ length: 24 }, async (_, client) => {
    for (let index = 0; index < 25; index++) await appendRetrying(`k${client}-${index}`)
  })
  // Clients without a key, which do not retry: a 201 must be stored once, a 503 at most once.
  let loading = true
  const unkeyed = Array.from({ length: 8 }, async (_, client) => {
    for (let index = 0; loading; index++) {
      if ((await post(`u${client}-${index}`)) === 503) await sleep(10)
    }
  })

  if (!(await eventually(async () => acknowledged >= 100, 1_000, 10))) throw new Error('too few appends before the kill')
  const beforeKill = await groupSizes(app)
  await redis.stop('SIGKILL')
  if (!(await eventually(async () => [...answered.values()].some((statuses) => statuses.includes(503)), 1_000, 10))) throw new Error('no 503 while Redis was down')
  await redis.start()
  await Promise.all(keyed)
  loading = false
  await Promise.all(unkeyed)

  t.ok(beforeKill.appends / beforeKill.groups > 1.5, `appends went in groups: ${beforeKill.appends} in ${beforeKill.groups} script calls before the kill`)
  const stored = new Map<string, number>()
  for (const name of await storedItems()) stored.set(name, (stored.get(name) ?? 0) + 1)
  const keyedNames = [...answered.keys()].filter((name) => name.startsWith('k'))
  t.equal(keyedNames.length, 24 * 25)
  t.same(keyedNames.filter((name) => stored.get(name) !== 1), [], 'every keyed name stored exactly once, however many 503s it had')
  const unkeyedNames = [...answered.keys()].filter((name) => name.startsWith('u'))
  t.same(unkeyedNames.filter((name) => answered.get(name)![0] === 201 && stored.get(name) !== 1), [], 'every 201 without a key stored exactly once')
  t.same(unkeyedNames.filter((name) => (stored.get(name) ?? 0) > 1), [], 'and no 503 without a key stored twice')
  const failed = [...answered.values()].filter((statuses) => statuses.includes(503)).length
  t.ok(failed > 1, `${failed} names had a 503`)
  t.same([...stored.keys()].filter((name) => !answered.has(name)), [], 'nothing stored that was not asked')
})
