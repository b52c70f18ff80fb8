import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { RedisConnection } from '@repo/service-kit'
import { createAcknowledgedAppends } from '../../src/store/acknowledged-appends.ts'
import type { ItemStoreScripts } from '../../src/store/scripts.ts'

// The groups' own bookkeeping, on a connection made up for it: what Redis and its replicas answer
// is replica-ack.test.ts's.

t.test('a group whose sending throws does not leave a group out: the appends after it are sent', async (t) => {
  const unhandled: unknown[] = []
  const record = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', record)
  t.teardown(() => process.off('unhandledRejection', record))
  // A Sentinel client whose first lease answers nothing (a client's bug): settling that group throws.
  let leases = 0
  const client = {
    use: async (send: (connection: { wait: () => Promise<number> }) => Promise<unknown>) => (leases++ === 0 ? [] : send({ wait: async () => 1 })),
  }
  // Only what the groups use of a connection: its deadline and `run`, here with the client above.
  const appends = { deadlineMs: 500, run: (_command: string, send: (leased: typeof client) => Promise<unknown>) => send(client) }
  const sendAcknowledged = createAcknowledgedAppends(appends as unknown as RedisConnection<ItemStoreScripts>, 1)

  void sendAcknowledged('append', async () => 'lost with its group')
  await new Promise((resolve) => setImmediate(resolve))
  t.match(unhandled, [TypeError], 'the first group threw')
  const next = sendAcknowledged('append', async () => 'appended')
  t.equal(await Promise.race([next, sleep(1_000, 'held back')]), 'appended', 'the next append is sent in a group of its own')
})
