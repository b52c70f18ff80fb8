import { CHUNK_INFIX, layoutKeys, type ListKeys } from './layout.ts'
import { DECLARED, KEYS, script } from './lua.ts'
import { EVENTS_SUFFIX } from './events-emit.ts'

/**
 * The two read-only scripts of the change feed (docs/events.md): each reads the list's state and
 * its events stream's in one atomic step, so that what a watcher is sent from the list and what it
 * is sent from the stream meet at an exact stream id.
 */

/** The list and its stream at one instant. */
export interface FeedState {
  /** The header's list id; undefined before the list exists. */
  listId: string | undefined
  /** An earlier version's list is being moved in. */
  legacy: boolean
  /** The stream's last-generated id ('0-0' before its first event): every event up to it is in what was read with it. */
  last: string
  /** The highest id the stream has trimmed away ('0-0': none): a resume point at or past it misses nothing. */
  maxDeleted: string
}

/** A chunk's entries from `offset` on, tombstones included. */
export interface FeedSegment {
  chunk: number
  offset: number
  entries: string[]
}

/** A snapshot step: the state, a few chunks read with it, and the chunk the next step starts at. */
export interface SnapshotStep extends FeedState {
  segments: FeedSegment[]
  next: number | undefined
}

const STATE = `
local eventsKey = index .. '${EVENTS_SUFFIX}'
local fields = redis.call('HMGET', header, 'id', 'legacy')
local last, deleted = '0-0', '0-0'
local info = redis.pcall('XINFO', 'STREAM', eventsKey)
if type(info) == 'table' and info.err == nil then
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] elseif info[i] == 'max-deleted-entry-id' then deleted = info[i + 1] end
  end
end
local state = {fields[1] or '', fields[2] and '1' or '', last, deleted}
`

function decodeState(reply: unknown[]): FeedState {
  const [listId, legacy, last, maxDeleted] = reply as [string, string, string, string]
  return { listId: listId === '' ? undefined : listId, legacy: legacy !== '', last, maxDeleted }
}

const feedStateScript = script(
  `${DECLARED} flags=no-writes
${KEYS}
${STATE}
return state`,
  3,
  (parser, keys: ListKeys) => parser.pushKeys(layoutKeys(keys)),
  (reply) => decodeState(reply as unknown[]),
)

/**
 * ARGV[1]: the chunk to start at, ARGV[2]: the offset in it, ARGV[3]: the most chunks to read. The
 * state, then the chunk after the last read ('' at the list's end), then each chunk read: its
 * number, the offset it was read from, its entries. Each command O(one chunk).
 */
const snapshotStepScript = script(
  `${DECLARED} flags=no-writes
${KEYS}
${STATE}
local from, offset, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local members = redis.call('ZRANGE', index, from, '+inf', 'BYSCORE', 'LIMIT', 0, most + 2)
local segments, nextChunk = {}, ''
for _, member in ipairs(members) do
  local n = tonumber(member)
  if n then
    if #segments == most then nextChunk = member; break end
    local start = n == from and offset or 0
    segments[#segments + 1] = {member, start, redis.call('LRANGE', index .. '${CHUNK_INFIX}' .. member, start, -1)}
  end
end
state[#state + 1] = nextChunk
state[#state + 1] = segments
return state`,
  3,
  (parser, keys: ListKeys, chunk: number, offset: number, most: number) => {
    parser.pushKeys(layoutKeys(keys))
    parser.push(String(chunk), String(offset), String(most))
  },
  (reply): SnapshotStep => {
    const values = reply as unknown[]
    const next = values[4] as string
    const segments = (values[5] as [string, number, string[]][]).map(([chunk, offset, entries]) => ({ chunk: Number(chunk), offset: Number(offset), entries }))
    return { ...decodeState(values), next: next === '' ? undefined : Number(next), segments }
  },
)

export const EVENTS_READ_SCRIPTS = { feedState: feedStateScript, snapshotStep: snapshotStepScript }
