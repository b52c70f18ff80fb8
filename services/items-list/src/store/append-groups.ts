import type { StoreCommand } from './metrics.ts'
import type { GroupedAppend, OnceOutcome } from './scripts.ts'

/**
 * Appends a group holds at most: a group's script holds Redis for about a microsecond a name, and
 * past a few dozen appends a larger group saves no round trip that matters.
 */
export const MAX_GROUP_APPENDS = 128
/**
 * Bytes of names a group holds at most (a group of one may hold more): 128 names of the longest
 * kind (1,024 characters, up to 4 KB each) would make one script call of half a megabyte.
 */
export const MAX_GROUP_BYTES = 64 * 1024

/**
 * Sends one group of appends, in order (one script call), and resolves to an outcome per append,
 * in the same order; rejects for the whole group.
 */
export type SendGroup = (command: StoreCommand, appends: GroupedAppend[], askedAt: number) => Promise<OnceOutcome[]>

/** One append waiting for its group to be sent, or for the group's answer. */
interface Waiting {
  append: GroupedAppend
  bytes: number
  askedAt: number
  resolve: (outcome: OnceOutcome) => void
  reject: (error: unknown) => void
}

/**
 * Group commit of appends (docs/list.md, "Appends in groups"): an append that finds no group out
 * is sent at once, alone; the appends that arrive while groups are out wait, and go as the next
 * group once every group out is answered (or at once, when enough wait to fill a group). No timer
 * waits for company: a lone client's append is never held back. Each group is one script call;
 * each append gets its own outcome, or the group's error. `observe`, if any, is told each group's size.
 */
export function createAppendGroups(send: SendGroup, observe?: (size: number) => void): (append: GroupedAppend) => Promise<OnceOutcome> {
  let waiting: Waiting[] = []
  let waitingBytes = 0
  let groupsOut = 0

  /** Sends the waiting appends from the oldest, as many as one group's bounds take. */
  function sendGroup(): void {
    let taken = 1
    let bytes = waiting[0]!.bytes
    while (taken < waiting.length && taken < MAX_GROUP_APPENDS && bytes + waiting[taken]!.bytes <= MAX_GROUP_BYTES) bytes += waiting[taken++]!.bytes
    const group = waiting.slice(0, taken)
    waiting = waiting.slice(taken)
    waitingBytes -= bytes
    groupsOut++
    observe?.(group.length)
    const command: StoreCommand = group.some(({ append }) => append.record !== undefined) ? 'append_once' : 'append'
    send(
      command,
      group.map(({ append }) => append),
      group[0]!.askedAt,
    ).then(
      (outcomes) => {
        answered()
        group.forEach((member, index) => member.resolve(outcomes[index]!))
      },
      (error: unknown) => {
        answered()
        for (const member of group) member.reject(error)
      },
    )
  }

  /** The next group goes as soon as none is out: before the answered group's appends are replied to. */
  function answered(): void {
    groupsOut--
    if (groupsOut === 0) while (waiting.length > 0) sendGroup()
  }

  return (append) =>
    new Promise<OnceOutcome>((resolve, reject) => {
      const bytes = Buffer.byteLength(append.name)
      waiting.push({ append, bytes, askedAt: performance.now(), resolve, reject })
      waitingBytes += bytes
      if (groupsOut === 0 || waiting.length >= MAX_GROUP_APPENDS || waitingBytes >= MAX_GROUP_BYTES) sendGroup()
    })
}
