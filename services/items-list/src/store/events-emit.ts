/**
 * The Lua that writes the list's change feed (docs/events.md): spliced into every script that
 * changes the list (`scripts.ts`, `lua.ts`), so that a change and its event are written by one
 * atomic script, or neither is. The events are a Redis Stream at `<key>:events`, trimmed to about
 * ITEMS_EVENTS_KEPT entries (`MAXLEN ~`). An entry's fields, in order: `t` and its type, then
 * one pair per name: its position and the name (an append), or its position and '' (a delete step).
 *
 * Every script that emits declares `EVENTS_KEPT` (from one of its arguments) before this Lua.
 */

/** `ITEMS_EVENTS_KEPT`'s default: the events a watcher may miss and still resume without a snapshot. */
export const DEFAULT_EVENTS_KEPT = 100_000

/** The stream's key, beside the list's other keys. */
export const EVENTS_SUFFIX = ':events'

/** A stream entry's types: names appended, names removed, the list replaced (a reset or a new list), a move ended. */
export const EVENT_APPEND = 'a'
export const EVENT_REMOVE = 'r'
export const EVENT_RESET = 'z'
export const EVENT_MOVED = 'm'

/** Digits of a position's chunk number (layout.ts allows up to 15) and of its offset (a chunk holds 1,000). */
export const POSITION_CHUNK_DIGITS = 15
export const POSITION_OFFSET_DIGITS = 3

/** A name's position: its chunk's number and its offset in the chunk, zero-padded, so that positions sort in list order. */
export function position(chunk: number, offset: number): string {
  return `${String(chunk).padStart(POSITION_CHUNK_DIGITS, '0')}${String(offset).padStart(POSITION_OFFSET_DIGITS, '0')}`
}

/**
 * `eventsKey`, `position(chunk, offset)` (the same string as the TypeScript `position`), and
 * `emit(type, pairs)`: an XADD of the type and the pairs (a flat Lua array; none for a reset), trimmed.
 * `index` is the list's key (`KEYS`).
 */
export const EVENTS_EMIT = `
local eventsKey = index .. '${EVENTS_SUFFIX}'
local function position(n, offset) return string.format('%0${POSITION_CHUNK_DIGITS}d%0${POSITION_OFFSET_DIGITS}d', n, offset) end
-- An entry holds at most 1,000 pairs (Lua's unpack has a limit): a longer run is several entries.
local function emit(type, pairs)
  if #pairs == 0 then
    redis.call('XADD', eventsKey, 'MAXLEN', '~', EVENTS_KEPT, '*', 't', type)
    return
  end
  for first = 1, #pairs, 2000 do
    redis.call('XADD', eventsKey, 'MAXLEN', '~', EVENTS_KEPT, '*', 't', type, unpack(pairs, first, math.min(first + 1999, #pairs)))
  end
end
`

/** The line a script starts its emitting Lua with: `EVENTS_KEPT` from its `argument`th ARGV. */
export function eventsKeptFrom(argument: number): string {
  return `local EVENTS_KEPT = ARGV[${argument}]`
}
