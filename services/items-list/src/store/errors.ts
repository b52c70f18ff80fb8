// The store's refusals that are not Redis's failures: each one a route answers with its own status.
/** A read position that belongs to another list than this one (a cursor from elsewhere). */
export class ForeignPositionError extends Error {
  override readonly name = 'ForeignPositionError'
}

/**
 * The list's keys disagree (its index deleted by hand, two lists to move in): the store refuses to
 * append, read or delete rather than answer for a place no read shows. The message says how.
 */
export class InconsistentListError extends Error {
  override readonly name = 'InconsistentListError'
}

/**
 * A delete that took more than one step found, on a later step, that its lock had expired or was
 * another delete's: whether the occurrences it removed were all there were, and whether another
 * delete answered for them, cannot be told. It did nothing more; a retry answers for the name.
 */
export class DeleteInterruptedError extends Error {
  override readonly name = 'DeleteInterruptedError'
}
