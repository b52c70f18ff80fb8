import { decodeHeader, HEADER_VERSION, idMember, type HeaderFields, type Page } from './layout.ts'
import { onLayout, type ListClient } from './list-client.ts'

/**
 * The held list: a short list (one read step) kept between reads from the list's start, with the
 * header's version it was read under, and handed out again, the same `Page`, while one round trip
 * of two O(1) commands revalidates it: the header's version unchanged (no write of names brings
 * it back), the index still naming the list, the connection still the one it was read on (a
 * failover or a restart may bring back less than was read). The version is read before the
 * chunks, so what is held is never older than its version says. Revalidating first only pays
 * while the list stands still: a revalidation that finds it changed reads it whole from then on,
 * until two reads in a row find the same version (docs/list.md, "The held list").
 */

/** What a fresh read from the list's start found (`reads.ts` makes it). */
export interface StartRead {
  page: Page
  /** The header's HEADER_VERSION fields, read before the chunks. */
  header: HeaderFields
  /** The list's id as the index names it. */
  listId: string | undefined
  /** The list ended within this one step. */
  whole: boolean
}

interface Held {
  page: Page
  version: string
  listId: string
  epoch: number
}

/** A read from the list's start that hands out the held list while it revalidates, and reads afresh otherwise. */
export function createHeldList(list: ListClient, readStart: () => Promise<StartRead>): () => Promise<Page> {
  let held: Held | undefined
  let revalidating = false
  return async function readHeld() {
    if (held && revalidating) {
      if (await stillCurrent(list, held)) return held.page
      revalidating = false
    }
    const epoch = list.epoch
    const read = await readStart()
    const header = decodeHeader(read.header)
    // Only a list the header and the index agree on, whole in one step, with nothing moving in.
    if (!read.whole || read.listId === undefined || header.listId !== read.listId || header.legacy) {
      held = undefined
      return read.page
    }
    revalidating ||= held?.version === header.version && held.epoch === epoch
    // Handed out to every GET while held: nobody may change it.
    Object.freeze(read.page.names)
    held = { page: read.page, version: header.version, listId: read.listId, epoch }
    return read.page
  }
}

/** The held list's revalidation: one round trip, the header's version and the index's id member. */
async function stillCurrent(list: ListClient, { version, listId, epoch }: Held): Promise<boolean> {
  // On its layout, as every read: keys an earlier version wrote are told apart as any read tells them.
  const [header, ours] = await onLayout(list, 'held_list', (client) =>
    Promise.all([client.hmGet(list.keys.header, HEADER_VERSION), client.zScore(list.keys.index, idMember(listId))]),
  )
  return ours !== null && decodeHeader(header).version === version && list.epoch === epoch
}
