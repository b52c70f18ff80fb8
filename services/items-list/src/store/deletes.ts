// The delete of every occurrence of a name: one bounded script step after another under the
// name's lock, waiting (then giving up) while another delete of the name holds it.
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { RedisUnavailableError } from '@repo/service-kit'
import { DeleteInterruptedError } from './errors.ts'
import { nameFingerprint } from './layout.ts'
import type { ListClient } from './list-client.ts'

/** A delete step's budget, by Redis's clock: well under the ~10 ms no command may exceed. */
const REMOVE_STEP_MICROS = 3_000
/** A delete lock outlives a step by far, and a replica that dies holding one by little. */
const REMOVE_LOCK_MS = 5_000
/**
 * How long a delete waits for another delete of the same name before it gives up (503), from the
 * first `busy` of the wait: a delete of a million names takes about 100 ms, so this is a queue of
 * dozens, or a holder gone astray.
 */
const REMOVE_WAIT_MS = 5_000

/**
 * Removes every occurrence of `name`, a `remove_step` script at a time, each going on from where
 * the last stopped under the name's lock; waits, then gives up, while another delete holds it.
 */
export async function removeAll(list: ListClient, name: string): Promise<number> {
  const { keys } = list
  const lock = keys.deleting(nameFingerprint(name))
  const token = randomUUID()
  const wait = createBusyWait()
  let removed = 0
  let from = 0
  let continuing = false
  for (;;) {
    const step = await list.withLayout('remove_step', (listId) =>
      list.run('remove_step', (client) => client.removeStep(keys, listId, lock, name, token, from, REMOVE_STEP_MICROS, REMOVE_LOCK_MS, continuing, list.eventsKept)),
    )
    if (step.state === 'lost') throw new DeleteInterruptedError(`the delete lost its lock after removing ${removed} occurrences: its outcome is unknown`)
    if (step.state === 'busy') {
      await wait.again()
      continue
    }
    wait.over()
    removed += step.removed
    if (step.state === 'done') return removed
    from = step.from
    continuing = true
  }
}

/** The pauses of a delete waiting for another delete of its name: from 5 ms to 100 ms, REMOVE_WAIT_MS at most. */
function createBusyWait() {
  let waits = 0
  let waitingSince: number | undefined
  return {
    async again() {
      waitingSince ??= performance.now()
      if (performance.now() - waitingSince > REMOVE_WAIT_MS) throw new RedisUnavailableError(`another delete of the name held it for ${REMOVE_WAIT_MS} ms`)
      await sleep(Math.min(100, 5 * 2 ** waits++))
    },
    over() {
      waitingSince = undefined
    },
  }
}
