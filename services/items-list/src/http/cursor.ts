// The `cursor` of a page's `next` link: a read position written as opaque base64url, and read back
// only when this service wrote it.
import type { ReadPosition } from '../store/item-store.ts'

/** What a cursor decodes to: the list's id, a chunk number, a place in that chunk. */
const POSITION = /^([A-Za-z0-9_-]{1,64})\.(\d{1,15})\.(\d{1,9})$/

/**
 * A read position as the `cursor` of a page's `next` link. Opaque to clients (base64url): its
 * shape may change with the list's layout, and only the service reads it back.
 */
export function encodeCursor({ listId, chunk, offset }: ReadPosition): string {
  return Buffer.from(`${listId}.${chunk}.${offset}`).toString('base64url')
}

/** The position `cursor` holds; undefined when it is not a cursor this service wrote. */
export function decodeCursor(cursor: string): ReadPosition | undefined {
  const [, listId, chunk, offset] = POSITION.exec(Buffer.from(cursor, 'base64url').toString()) ?? []
  return listId === undefined ? undefined : { listId, chunk: Number(chunk), offset: Number(offset) }
}
