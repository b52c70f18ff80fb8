import { defineScript, type CommandParser, type RedisScripts } from 'redis'
import { CHUNK_INFIX, CHUNK_NAMES, ID_PREFIX, LEGACY_MEMBER } from './layout.ts'
import { EVENT_MOVED, EVENT_RESET } from './events-emit.ts'

/**
 * What the store's scripts (`scripts.ts`) are written with: the Lua they share, the two answers
 * the store tells apart from a script's own, and one typed way to declare a script.
 */

/**
 * The error reply of a script that found the header and the index disagreeing: whatever it would
 * write could land where no read looks, so it refuses (docs/list.md, "When the keys disagree").
 */
export const INCONSISTENT = 'INCONSISTENT'
/**
 * A script's answer when the layout must be made and it was given no list id to make it with: it
 * wrote nothing. The store then looks for chunks left without their index and header (a SCAN,
 * never on an ordinary write), and sends it again with an id.
 */
export const NO_LAYOUT = 'nolayout'

/**
 * Every script's first line. Declared (shebang) scripts are refused whole when Redis is out of
 * memory, where an undeclared one would run until its first command that may grow memory: a
 * migration step that had popped names from the legacy list and was then refused their chunk
 * would lose them.
 */
export const DECLARED = '#!lua'

/** The keys every script is given first (`layoutKeys`), by name. */
export const KEYS = `local index, header, legacy = KEYS[1], KEYS[2], KEYS[3]`

/**
 * Lua shared by every script but the append's common case. ARGV[1] is a fresh list id, used only
 * when the list does not exist yet, or '' for none. The header keeps the list's id too (`id`), so
 * that one O(1) `ZSCORE` tells whether the index is still the one the header counts for.
 *
 * `diagnose()` says how the header and the index disagree, if they do: a header without its index
 * (`DEL ITEMS_KEY`), an index without its `id:` member or without its header, a plain list at the
 * key beside the header or beside a legacy list. Chunks left without both their index and header
 * are the one disagreement no O(1) command sees: the store looks for them with SCAN before it lets
 * a script make the layout (`NO_LAYOUT`). `refuseInconsistent()` refuses what diagnose() finds
 * (an error reply starting INCONSISTENT), before anything is written. `ensure()` refuses it too,
 * and otherwise makes the layout exist: it turns an earlier version's list at the index's key
 * into the legacy list (one O(1) RENAME: from then on that version's commands meet a sorted set
 * and fail, rather than act on part of the list), gives a new list its id, and copies into the
 * header the id of an index made before the header kept it; it answers false, having written
 * nothing, when the layout must be made and ARGV[1] is ''. `migrate(chunks)` moves up to that
 * many chunks' worth of names from the legacy list's head into new chunks, and clears `legacy`
 * from the index and the header once it is empty. A new list and the end of a move are each an
 * event (`events-emit.ts`): the script that includes PRELUDE has
 * `EVENTS_EMIT` (and so `EVENTS_KEPT`) before it.
 */
export const PRELUDE = `
local CHUNK_NAMES = ${CHUNK_NAMES}
-- Chunk keys are built here, not given in KEYS: which chunks a script touches is known only as it runs, so it cannot declare them, and the store cannot run on Redis Cluster.
local function chunk(n) return index .. '${CHUNK_INFIX}' .. n end

local function diagnose()
  local kind = redis.call('TYPE', index).ok
  local count, id = unpack(redis.call('HMGET', header, 'count', 'id'))
  if kind == 'list' then
    if redis.call('EXISTS', legacy) == 1 then
      return 'ITEMS_KEY is a plain list and ' .. legacy .. ' exists: two lists to move in, refusing to choose'
    end
    if count then return 'ITEMS_KEY is a plain list beside the header of a chunked list' end
    return nil
  end
  if kind == 'none' then
    if count then return 'the index at ITEMS_KEY is gone while its header counts ' .. count .. ' names' end
    return nil
  end
  if kind ~= 'zset' then return 'ITEMS_KEY holds a ' .. kind .. ', not the list' end
  if not count then return 'the index at ITEMS_KEY has no header' end
  if id then
    if not redis.call('ZSCORE', index, '${ID_PREFIX}' .. id) then return 'the index at ITEMS_KEY has lost its member ${ID_PREFIX}' .. id end
  elseif not redis.call('ZRANGE', index, '-inf', '-inf', 'BYSCORE', 'LIMIT', 0, 1)[1] then
    return 'the index at ITEMS_KEY has no ${ID_PREFIX} member'
  end
  return nil
end

local function refuseInconsistent()
  local reason = diagnose()
  if reason then error({err = '${INCONSISTENT} ' .. reason}) end
end

local function ensure()
  refuseInconsistent()
  local kind = redis.call('TYPE', index).ok
  if kind == 'zset' then
    if not redis.call('HGET', header, 'id') then
      local member = redis.call('ZRANGE', index, '-inf', '-inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
      redis.call('HSET', header, 'id', string.sub(member, ${ID_PREFIX.length + 1}))
    end
    return true
  end
  local id = ARGV[1]
  if id == '' then return false end
  if kind == 'list' then
    redis.call('RENAME', index, legacy)
    redis.call('ZADD', index, '-inf', '${ID_PREFIX}' .. id, '+inf', '${LEGACY_MEMBER}')
    redis.call('HSET', header, 'count', redis.call('LLEN', legacy), '${LEGACY_MEMBER}', 1)
  else
    redis.call('ZADD', index, '-inf', '${ID_PREFIX}' .. id)
    redis.call('HSET', header, 'count', 0)
  end
  redis.call('HSET', header, 'id', id, 'tail', 0, 'fill', CHUNK_NAMES)
  -- A new list: every watcher starts again from it.
  emit('${EVENT_RESET}', {})
  return true
end

local function migrate(chunks)
  local at = redis.call('HMGET', header, 'tail', 'fill')
  local tail, fill = tonumber(at[1]), tonumber(at[2])
  local moved = 0
  for _ = 1, chunks do
    local names = redis.call('LPOP', legacy, CHUNK_NAMES)
    if not names then break end
    tail = tail + 1
    redis.call('RPUSH', chunk(tail), unpack(names))
    redis.call('ZADD', index, tail, tail)
    fill = #names
    moved = moved + fill
  end
  if redis.call('EXISTS', legacy) == 0 then
    redis.call('ZREM', index, '${LEGACY_MEMBER}')
    -- The move ended: the names it moved have positions now, and every watcher reads them afresh.
    if redis.call('HDEL', header, '${LEGACY_MEMBER}') == 1 then emit('${EVENT_MOVED}', {}) end
  end
  redis.call('HSET', header, 'tail', tail, 'fill', fill)
  return moved
end
`

/**
 * One way to declare a script: its Lua, how many of its arguments are keys (undefined where each
 * call says so first, as a group's records vary), how a call's arguments become KEYS and ARGV, and
 * what its reply means. node-redis sends it by SHA, and loads it once where Redis does not know it
 * (after a restart or a failover).
 */
export function script<Args extends unknown[], Reply>(
  lua: string,
  numberOfKeys: number | undefined,
  parseCommand: (parser: CommandParser, ...args: Args) => void,
  transformReply: (reply: unknown) => Reply,
): Script<Args, Reply> {
  return defineScript({ SCRIPT: lua, ...(numberOfKeys === undefined ? {} : { NUMBER_OF_KEYS: numberOfKeys }), parseCommand, transformReply })
}

/** A declared script as node-redis types a client's method: its arguments and its reply. */
export type Script<Args extends unknown[], Reply> = RedisScripts[string] & {
  parseCommand(this: void, parser: CommandParser, ...args: Args): void
  transformReply(this: void, reply: unknown): Reply
}
