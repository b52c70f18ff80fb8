import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { appendMany, buildService, listAnswers, nameAt } from './helpers/service.ts'

// The reset (src/reset.ts), run as an operator runs it (docs/list.md, "Emptying the list"): it
// empties the list whatever state its keys are in, deletes every old chunk however numbered, and
// numbers the new list's chunks past them, so that no old name ever comes back.

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const { app, inspector, redis } = await buildService(t)

/** Runs the reset as an operator does (docs/list.md, "Emptying the list"): its exit code and output. */
async function runReset(args: string[], env: Record<string, string> = { REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) }) {
  const child = spawn(process.execPath, ['--conditions=@repo/source', 'src/reset.ts', ...args], { cwd: SERVICE_ROOT, env: { PATH: process.env.PATH ?? '', ...env } })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const [code] = (await once(child, 'close')) as [number | null]
  return { code, output }
}

t.test('the reset (src/reset.ts --yes) empties a list whose index was deleted: it then reads empty, and appends are read', async (t) => {
  for (let index = 0; index < 2_500; index++) await app.itemStore.append(nameAt(index))
  await inspector.del('items')
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'refused' } })).statusCode, 503)

  const refusedWithoutYes = await runReset([])
  t.equal(refusedWithoutYes.code, 2)
  t.match(refusedWithoutYes.output, /run it again with --yes/)
  t.equal(await inspector.exists('items:chunk:1'), 1, 'nothing done without --yes')

  const reset = await runReset(['--yes'])
  t.equal(reset.code, 0, reset.output)
  t.match(reset.output, /"chunks":3.*the list is empty/)
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: [] })
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'after the reset' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: ['after the reset'] })
  t.same(await inspector.keys('items:chunk:*'), ['items:chunk:4'], 'the old chunks are gone; new ones are numbered after them')
  t.equal((await app.inject({ method: 'DELETE', url: '/items/after%20the%20reset' })).statusCode, 200)
})

t.test('chunks left without their index and header (both deleted by hand) are refused, not written into by a new list, and the reset clears them', async (t) => {
  for (let index = 0; index < 2_500; index++) await app.itemStore.append(nameAt(index))
  await inspector.del(['items', 'items:header'])
  const { statuses, post } = await listAnswers(app)
  t.same(statuses, [503, 503, 503, 503, 503, 503])
  t.match(post, { detail: /^Item store inconsistent: the index and the header are gone, and items:chunk:[123] is still there$/ })
  t.equal(await inspector.lLen('items:chunk:1'), 1_000, 'no name added to an old chunk')
  t.equal(await inspector.exists(['items', 'items:header']), 0, 'no layout made over them')

  t.equal(await app.itemStore.reset(), 3)
  t.equal((await app.inject({ method: 'POST', url: '/items/', payload: { name: 'after the reset' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: ['after the reset'] })
  t.same(await inspector.keys('items:chunk:*'), ['items:chunk:4'])
})

t.test('chunks after a gap (a chunk emptied by deletes) without their index and header: refused, and the reset deletes every one, numbering new chunks after them', async (t) => {
  // Chunk 2 holds nothing but `middle`: deleting it deletes the chunk, a gap in the numbers.
  await appendMany(app, 3_001, (index) => (index >= 1_000 && index < 2_000 ? 'middle' : nameAt(index)))
  t.equal((await app.inject({ method: 'DELETE', url: '/items/middle' })).statusCode, 200)
  t.same((await inspector.keys('items:chunk:*')).sort(), ['items:chunk:1', 'items:chunk:3', 'items:chunk:4'])
  await inspector.del(['items', 'items:header'])
  t.same((await listAnswers(app)).statuses, [503, 503, 503, 503, 503, 503])

  const reset = await runReset(['--yes'])
  t.equal(reset.code, 0, reset.output)
  t.match(reset.output, /"chunks":3.*the list is empty/, 'the three old chunks deleted')
  t.same(await inspector.keys('items:chunk:*'), [], 'none left, after the gap either')
  await appendMany(app, 2_001, (index) => `new ${index}`)
  const listed = (await app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>().items
  t.equal(listed.length, 2_001)
  t.same(listed.filter((name) => !name.startsWith('new ')), [], 'no old name comes back')
  t.ok((await inspector.keys('items:chunk:*')).every((key) => Number(key.split(':').at(-1)) > 4), 'new chunks numbered past every old one')
})

t.test('the reset of a one-chunk list leaves no chunk behind', async (t) => {
  await appendMany(app, 10, nameAt)
  t.equal(await app.itemStore.reset(), 1, 'its one chunk deleted')
  t.same(await inspector.keys('items:chunk:*'), [])
})

t.test('the reset empties a list mid-move, and a Redis without a list; it exits 1 when Redis cannot be reached', async (t) => {
  await inspector.rPush('items', [nameAt(0), nameAt(1)])
  t.equal((await app.inject({ method: 'GET', url: '/items/?limit=1' })).statusCode, 200, 'moved aside by the read')
  t.equal((await runReset(['--yes'])).code, 0)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: [] })
  t.equal(await inspector.exists('items:legacy'), 0)

  await inspector.del(['items', 'items:header'])
  t.equal((await runReset(['--yes'])).code, 0)
  t.same((await app.inject({ method: 'GET', url: '/items/' })).json(), { items: [] })

  const unreachable = await runReset(['--yes'], { REDIS_HOST: '127.0.0.1', REDIS_PORT: '1' })
  t.equal(unreachable.code, 1)
  t.match(unreachable.output, /the list was not reset/)
})

