import t from 'tap'
import { withDeadline } from '../../src/redis/deadline.ts'

const active = (kind: string) => process.getActiveResourcesInfo().filter((resource) => resource === kind).length
const timers = () => active('Timeout')
const expired = () => new Error('expired')
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

t.test('a command settled within its deadline, answered or failed, leaves no timer behind', async (t) => {
  // Every Redis command goes through it: a timer left per command would hold the deadline's worth
  // of timers, each keeping the process busy, under load.
  const before = timers()
  // Settled before their clocks start (on the next turn): no timer is ever made.
  const answered = await Promise.all(Array.from({ length: 50 }, (_, index) => withDeadline(Promise.resolve(index), 2_000, expired)))
  const failed = await Promise.allSettled(Array.from({ length: 50 }, () => withDeadline(Promise.reject(new Error('refused')), 2_000, expired)))
  await nextTurn()
  t.equal(answered.length, 50)
  t.ok(failed.every((result) => result.status === 'rejected' && (result.reason as Error).message === 'refused'), 'the failure is the command’s own')
  t.equal(timers(), before, 'none for commands settled before their clocks started')

  // Settled once their clocks have started: each timer is cleared.
  const answer = Promise.withResolvers<string>()
  const refusal = Promise.withResolvers<string>()
  const waiting = [withDeadline(answer.promise, 2_000, expired), withDeadline(refusal.promise, 2_000, expired).catch((error: Error) => error.message)]
  await nextTurn()
  t.equal(timers(), before + 2, 'one timer each while they wait')
  answer.resolve('answer')
  refusal.reject(new Error('refused'))
  t.same(await Promise.all(waiting), ['answer', 'refused'])
  t.equal(timers(), before, 'none once they are settled')
})

t.test('the commands asked for in one turn start their clocks together: one setImmediate between them, not one each', async (t) => {
  const before = active('Immediate')
  const commands = Array.from({ length: 50 }, () => Promise.withResolvers<number>())
  const waiting = commands.map(({ promise }) => withDeadline(promise, 2_000, expired))
  t.equal(active('Immediate'), before + 1)
  await nextTurn()
  t.ok(timers() >= 50, 'every clock started')
  commands.forEach(({ resolve }, index) => resolve(index))
  t.equal((await Promise.all(waiting)).length, 50)
})

t.test('a command that does not settle within its deadline is rejected with what expired() makes', async (t) => {
  const error = await withDeadline(new Promise(() => {}), 20, expired).catch((failure: unknown) => failure)
  t.match(error, { message: 'expired' })
})

t.test('the clock starts when the command is written, on the next turn: time this process spent busy before then is not counted', async (t) => {
  // As node-redis does: a command asked for in one turn is written on the next (setImmediate),
  // and here answered 10 ms after that. It is asked for from a setImmediate callback that then
  // keeps the process busy for three deadlines: the deadline's own timer is due before the
  // command has even been written.
  const answer = await new Promise<Promise<string>>((resolve) =>
    setImmediate(() => {
      const command = new Promise<string>((answered) => setImmediate(() => setTimeout(() => answered('answer'), 10)))
      const deadline = withDeadline(command, 50, expired).catch((error: Error) => error.message)
      const end = performance.now() + 150
      while (performance.now() < end) {
        // Busy: nothing else runs.
      }
      resolve(deadline)
    }),
  )
  t.equal(answer, 'answer')
})
