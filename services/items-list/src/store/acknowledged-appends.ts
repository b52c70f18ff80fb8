// Appends acknowledged by replicas (ITEMS_MIN_REPLICAS_ACK): each append's script, then one WAIT
// for every append sent while the last WAIT was out, on a connection of their own.
import type { RedisClient, RedisCommands, RedisConnection, RedisSentinelClient } from '@repo/service-kit'
import type { ItemStoreScripts } from './scripts.ts'
import type { StoreCommand } from './metrics.ts'

/** Fewer replicas than `ITEMS_MIN_REPLICAS_ACK` confirmed an append within the wait. */
export class ReplicasBehindError extends Error {
  override readonly name = 'ReplicasBehindError'
}

/** A Sentinel client's primary connection, leased to one caller while it is used (`use`). */
type LeasedClient = Parameters<Parameters<RedisSentinelClient<ItemStoreScripts>['use']>[0]>[0]
/** One connection to the primary: the commands sent on it are run in the order they were sent. */
export type OneConnection = RedisClient<ItemStoreScripts> | LeasedClient

/**
 * Sends an append's `write` (a group of appends: one script call) and resolves to its reply once
 * enough replicas hold it; `askedAt`, when its oldest append was asked (by default, now).
 */
export type AcknowledgedAppend = <T>(command: StoreCommand, write: (connection: OneConnection) => Promise<T>, askedAt?: number) => Promise<T>

/** One append waiting for its group to be sent, or for the group's answer. */
interface Member {
  write: (connection: OneConnection) => Promise<unknown>
  askedAt: number
  resolve: (reply: unknown) => void
  reject: (error: unknown) => void
}

/**
 * Appends that resolve only once `minReplicas` replicas hold them, sent on `appends` in groups.
 *
 * A group's writes, then one `WAIT`, are sent on one connection to the primary, which runs them in
 * that order: the WAIT counts replicas for these writes (the last one's place in the stream
 * covers the others), and never for a fresh connection's, which has written nothing, so that any
 * replica would do. Each write (a group of appends, `append-groups.ts`: one script call) keeps its
 * own reply: one that Redis refuses fails its own group alone.
 *
 * `WAIT` blocks the connection it runs on. One WAIT per append would queue the WAITs of a burst
 * behind each other while the replicas are behind: the fifth append would wait for five, miss the
 * deadline, and a Redis that answers every command would be set aside for every append. So while
 * a group is out, the appends that arrive wait for it, then go together as the next group. A
 * group's WAIT lasts what is left of its oldest append's half of the deadline: no append waits
 * longer than that, counted from when it was asked, and each is answered (a 503 when the
 * replicas are behind) before the deadline sets Redis aside.
 */
export function createAcknowledgedAppends(appends: RedisConnection<ItemStoreScripts>, minReplicas: number): AcknowledgedAppend {
  const waitBudgetMs = appends.deadlineMs / 2
  let waiting: Member[] = []
  let groupOut = false

  async function sendGroups(client: RedisCommands<ItemStoreScripts>): Promise<void> {
    groupOut = true
    // Whatever throws, the flag falls: left up, it would hold every later append back for good.
    try {
      while (waiting.length > 0) {
        const group = waiting
        waiting = []
        // WAIT 0 would wait forever: a millisecond at least.
        const waitMs = Math.max(1, Math.floor(waitBudgetMs - (performance.now() - group[0]!.askedAt)))
        const outcomes = await onOneConnection(client, (connection) =>
          Promise.allSettled([...group.map((member) => member.write(connection)), connection.wait(minReplicas, waitMs)]),
        ).catch((error: unknown) => [...group, undefined].map((): PromiseRejectedResult => ({ status: 'rejected', reason: error })))
        settle(group, outcomes, waitMs)
      }
    } finally {
      groupOut = false
    }
  }

  /** Each member's own reply or error; a failed WAIT, or too few replicas, fails every write that succeeded. */
  function settle(group: Member[], outcomes: PromiseSettledResult<unknown>[], waitMs: number): void {
    const confirmed = outcomes[group.length]!
    const behind =
      confirmed.status === 'rejected'
        ? (confirmed.reason as unknown)
        : (confirmed.value as number) < minReplicas
          ? new ReplicasBehindError(`${String(confirmed.value)} of ${minReplicas} replicas confirmed the append within ${waitMs} ms`)
          : undefined
    group.forEach((member, index) => {
      const written = outcomes[index]!
      if (written.status === 'rejected') member.reject(written.reason)
      else if (behind !== undefined) member.reject(behind)
      else member.resolve(written.value)
    })
  }

  return <T>(command: StoreCommand, write: (connection: OneConnection) => Promise<T>, askedAt = performance.now()) =>
    appends.run(
      command,
      (client) =>
        new Promise<T>((resolve, reject) => {
          waiting.push({ write, askedAt, resolve: resolve as (reply: unknown) => void, reject })
          if (!groupOut) void sendGroups(client)
        }),
    )
}

/**
 * Runs `send` on one connection to the primary: a client's own, or one a Sentinel client leases
 * for the while (it would otherwise send each command to whichever primary it knows of then).
 * Async, so that a command that throws as it is built rejects like one Redis refused.
 */
async function onOneConnection<T>(client: RedisCommands<ItemStoreScripts>, send: (connection: OneConnection) => Promise<T>): Promise<T> {
  return 'use' in client ? client.use(send) : send(client)
}
