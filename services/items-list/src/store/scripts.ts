import { layoutKeys, LEGACY_MEMBER, TOMBSTONE, CHUNK_INFIX, CHUNK_NAMES, ID_PREFIX, type LayoutKeys, type ListKeys } from './layout.ts'
import { EVENTS_READ_SCRIPTS } from './events-read.ts'
import { DECLARED, INCONSISTENT, KEYS, NO_LAYOUT, PRELUDE, script } from './lua.ts'
import { DEFAULT_EVENTS_KEPT, EVENT_APPEND, EVENT_REMOVE, EVENT_RESET, EVENTS_EMIT, eventsKeptFrom } from './events-emit.ts'

/**
 * The Lua scripts that write the list (the layout they keep is `layout.ts`'s; the Lua they share,
 * and how one is declared, `lua.ts`'s). Each write is one
 * script, so that a change and everything that must agree with it (the header, the index, an
 * idempotency record) are made together or not at all, and every command a script sends is
 * O(one chunk). Why scripts sent by SHA and not a Redis 7 function library: docs/list.md,
 * "Scripts, not functions".
 */

/** What became of an append. */
export type AppendOutcome = 'appended' | 'full'
/** What became of an append made under an idempotency key. */
export type OnceOutcome = AppendOutcome | 'replayed' | 'conflict'

/**
 * How a delete step went: `busy` while another delete of the name holds its lock; `lost` when a
 * step after the first finds the lock expired or another delete's, and so did nothing; `more`
 * with where the next step goes on; `done`.
 */
export type DeleteProgress = { state: 'busy' } | { state: 'lost' } | { state: 'done'; removed: number } | { state: 'more'; removed: number; from: number }

/** What a migration step moved, and how many names are left to move. */
export interface MigrationProgress {
  moved: number
  left: number
}


/**
 * What every group of appends of one list sends alike, built once (`appendArguments`): its keys,
 * ITEMS_MAX_COUNT, IDEMPOTENCY_TTL_SECONDS and ITEMS_EVENTS_KEPT as text.
 */
export interface AppendArguments {
  keys: LayoutKeys
  maxCount: string
  ttlSeconds: string
  eventsKept: string
}

export function appendArguments(keys: ListKeys, maxCount: number, ttlSeconds: number, eventsKept = DEFAULT_EVENTS_KEPT): AppendArguments {
  return { keys: layoutKeys(keys), maxCount: String(maxCount), ttlSeconds: String(ttlSeconds), eventsKept: String(eventsKept) }
}

/** One append of a group: its name, and for one made under an idempotency key, its record's key and the name's fingerprint. */
export interface GroupedAppend {
  name: string
  record?: string
  fingerprint?: string
}

/**
 * The appends of a group, in arrival order (docs/list.md, "Appends in groups"). ARGV[1]: a list
 * id, or '' (the common case); ARGV[2]: ITEMS_MAX_COUNT; ARGV[3]: a record's lifetime (s); ARGV[4]:
 * ITEMS_EVENTS_KEPT; then two arguments an append: its name and its fingerprint ('' without an idempotency key). KEYS[4]
 * on: the records of the appends that have a key, in the same order. Answers NO_LAYOUT having
 * written nothing, or an outcome per append, in order: 'appended', 'full' (the cap reached, by
 * the list or by the appends before it in the group), 'replayed' or 'conflict' (its key already
 * used, before or earlier in the group, for the same name or another).
 *
 * Never written in part: it reads everything it decides on first (the records, the header, the
 * index's id, each chunk it will open), and refuses or answers NO_LAYOUT before its first write.
 * Past that, no command can fail: the first write is the first name's RPUSH (a chunk or the
 * legacy list that is not a list fails there, with nothing written yet), every later RPUSH goes to
 * that same key or to a chunk found absent, and Redis refuses a declared script for want of
 * memory before it runs, never half-way. Its common case (the list there, its keys agreeing) is
 * the header read, the index's id checked, a push a name and the header written, before PRELUDE is
 * ever made: a hot path, and Redis's time is everyone's.
 */
const appendGroupScript = script(
  `${DECLARED}
${KEYS}
${eventsKeptFrom(4)}
${EVENTS_EMIT}
local maxCount, ttl = tonumber(ARGV[2]), ARGV[3]
local appends = (#ARGV - 4) / 2
local function nameOf(i) return ARGV[3 + 2 * i] end
local function fingerprintOf(i) return ARGV[4 + 2 * i] end

-- Each record read once; a group of conflicts alone needs no list.
local recordOf, stored, needsList = {}, {}, false
local nextKey = 3
for i = 1, appends do
  local fingerprint = fingerprintOf(i)
  if fingerprint == '' then
    needsList = true
  else
    nextKey = nextKey + 1
    local record = KEYS[nextKey]
    recordOf[i] = record
    if stored[record] == nil then stored[record] = redis.call('GET', record) end
    if stored[record] == false or stored[record] == fingerprint then needsList = true end
  end
end

local at = {}
if needsList then
  at = redis.call('HMGET', header, 'count', 'tail', 'fill', '${LEGACY_MEMBER}', 'id')
  -- The index still holds the header's id: it was neither deleted nor replaced. pcall: a plain list
  -- at the key answers WRONGTYPE (an error, not a score), which ensure() names.
  if not (at[5] and type(redis.pcall('ZSCORE', index, '${ID_PREFIX}' .. at[5])) == 'string') then
    ${PRELUDE}
    if not ensure() then return '${NO_LAYOUT}' end
    at = redis.call('HMGET', header, 'count', 'tail', 'fill', '${LEGACY_MEMBER}')
  end
end

-- Each append's outcome, in order, as if each were a script of its own.
local outcomes, recordedHere, appended = {}, {}, {}
-- A group of conflicts alone read no header: it stores nothing, from a count of 0.
local count, tail, fill, toLegacy = tonumber(at[1]) or 0, tonumber(at[2]), tonumber(at[3]), at[4]
local before = count
for i = 1, appends do
  local record = recordOf[i]
  local recorded = record and (recordedHere[record] or stored[record])
  if recorded then
    outcomes[i] = recorded == fingerprintOf(i) and 'replayed' or 'conflict'
  elseif count >= maxCount then
    outcomes[i] = 'full'
  else
    outcomes[i] = 'appended'
    count = count + 1
    if record then recordedHere[record] = fingerprintOf(i) end
  end
end

-- The chunks the group opens must not be there: a push into one would fail half-way through the
-- group, or put names where no read looks.
if count > before and not toLegacy then
  local opens = math.ceil((count - before - (${CHUNK_NAMES} - fill)) / ${CHUNK_NAMES})
  for n = tail + 1, tail + opens do
    if redis.call('EXISTS', index .. '${CHUNK_INFIX}' .. n) == 1 then
      error({err = '${INCONSISTENT} chunk ' .. n .. ' is there already, past the last chunk ' .. tail})
    end
  end
end

for i = 1, appends do
  if outcomes[i] == 'appended' then
    -- One name's write: whatever is written for this one name (its push, its record, its place
    -- in the group's event) is written here, and only here.
    local name = nameOf(i)
    if toLegacy then
      -- A name of the legacy list has no position yet: the move's end is the event (lua.ts, migrate()).
      redis.call('RPUSH', legacy, name)
    else
      if fill >= ${CHUNK_NAMES} then
        tail, fill = tail + 1, 0
        redis.call('ZADD', index, tail, tail)
      end
      redis.call('RPUSH', index .. '${CHUNK_INFIX}' .. tail, name)
      appended[#appended + 1] = position(tail, fill)
      appended[#appended + 1] = name
      fill = fill + 1
    end
    if recordOf[i] then redis.call('SET', recordOf[i], fingerprintOf(i), 'EX', ttl) end
  end
end
if count > before then
  if toLegacy then
    redis.call('HSET', header, 'count', count)
  else
    redis.call('HSET', header, 'count', count, 'tail', tail, 'fill', fill)
    emit('${EVENT_APPEND}', appended)
  end
end
-- A replay rewrites its record as it is, so that a WAIT after the group waits for the replicas to
-- hold the record, wherever the first append was made.
for i = 1, appends do
  local record = recordOf[i]
  if outcomes[i] == 'replayed' and stored[record] then redis.call('SET', record, stored[record], 'KEEPTTL') end
end
return outcomes`,
  undefined,
  (parser, list: AppendArguments, listId: string, appends: readonly GroupedAppend[]) => {
    const records = appends.flatMap(({ record }) => (record === undefined ? [] : [record]))
    parser.push(String(list.keys.length + records.length))
    parser.pushKeys(list.keys)
    parser.pushKeys(records)
    parser.push(listId, list.maxCount, list.ttlSeconds, list.eventsKept)
    for (const { name, fingerprint } of appends) parser.push(name, fingerprint ?? '')
  },
  (reply) => (reply === NO_LAYOUT ? NO_LAYOUT : (reply as OnceOutcome[])),
)

/**
 * KEYS[4]: the name's delete lock. ARGV[2]: the name, ARGV[3]: this delete's token, ARGV[4]: the
 * first chunk number to look at, ARGV[5]: the step's budget (µs, by Redis's own clock), ARGV[6]:
 * the lock's lifetime (ms), ARGV[7]: 1 for a step after this delete's first, ARGV[8]:
 * ITEMS_EVENTS_KEPT. The occurrences a step removes are its event: their positions.
 *
 * Turns every occurrence of the name in the chunks from ARGV[4] on into a tombstone (`LPOS … COUNT 0`
 * finds them, `LSET` replaces them: the chunk's other names keep their places), drops chunks left
 * with nothing but tombstones, moves the legacy list in when the chunks run out, and stops when its
 * budget is spent. It may run while Redis is out of memory (allow-oom): a delete frees memory, and
 * a full Redis is when a delete is most wanted. A delete that needs more than one step holds the
 * name's lock from its first to its last, each step renewing it, so that a concurrent delete of
 * the same name waits (`busy`) and then finds nothing: of concurrent deletes of one name exactly
 * one removes it, however long the list.
 *
 * The lock is a lease: a holder paused past it (a long GC, a frozen container) may find on its
 * next step that another delete has run meanwhile. That step does nothing and answers `lost`: the
 * holder cannot tell whether the occurrences it removed were all there were, nor whether another
 * delete answered for them, so it must not report them (docs/list.md, "Deletes that lose their lock").
 */
const removeStepScript = script(
  `${DECLARED} flags=allow-oom
${KEYS}
${eventsKeptFrom(8)}
${EVENTS_EMIT}
${PRELUDE}
if not ensure() then return {'${NO_LAYOUT}'} end
local lock, name, token, from = KEYS[4], ARGV[2], ARGV[3], tonumber(ARGV[4])
local holder = redis.call('GET', lock)
if ARGV[7] == '1' then
  if holder ~= token then return {'lost'} end
elseif holder then
  return {'busy'}
end
local function now() local t = redis.call('TIME'); return t[1] * 1000000 + t[2] end
local deadline = now() + tonumber(ARGV[5])
local removed, finished, gone = 0, false, {}
while not finished and now() < deadline do
  local members = redis.call('ZRANGE', index, from, '+inf', 'BYSCORE', 'LIMIT', 0, 16)
  finished = #members == 0
  for _, member in ipairs(members) do
    if member == '${LEGACY_MEMBER}' then
      migrate(1)
      break
    end
    local n = tonumber(member)
    local key = chunk(n)
    local found = redis.call('LPOS', key, name, 'COUNT', 0)
    for _, at in ipairs(found) do
      redis.call('LSET', key, at, '${TOMBSTONE}')
      gone[#gone + 1] = position(n, at)
      gone[#gone + 1] = ''
    end
    removed = removed + #found
    if #found > 0 and #redis.call('LPOS', key, '${TOMBSTONE}', 'COUNT', 0) == redis.call('LLEN', key) then
      redis.call('DEL', key)
      redis.call('ZREM', index, member)
      -- The next append must not write into the chunk again: a reader may hold a place in it.
      if n == tonumber(redis.call('HGET', header, 'tail')) then redis.call('HSET', header, 'fill', CHUNK_NAMES) end
    end
    from = n + 1
    if now() >= deadline then break end
  end
end
if removed > 0 then
  redis.call('HINCRBY', header, 'count', -removed)
  emit('${EVENT_REMOVE}', gone)
end
if finished then
  if holder then redis.call('DEL', lock) end
  return {'done', removed}
end
redis.call('SET', lock, token, 'PX', ARGV[6])
return {'more', removed, from}`,
  4,
  (parser, keys: ListKeys, listId: string, lock: string, name: string, token: string, from: number, budgetMicros: number, lockMs: number, continuing: boolean, eventsKept = DEFAULT_EVENTS_KEPT) => {
    parser.pushKeys([...layoutKeys(keys), lock])
    parser.push(listId, name, token, String(from), String(budgetMicros), String(lockMs), continuing ? '1' : '0', String(eventsKept))
  },
  (reply): DeleteProgress | typeof NO_LAYOUT => {
    const [state, removed, from] = reply as [string, number?, number?]
    if (state === NO_LAYOUT) return NO_LAYOUT
    if (state === 'busy' || state === 'lost') return { state }
    if (state === 'done') return { state, removed: Number(removed) }
    return { state: 'more', removed: Number(removed), from: Number(from) }
  },
)

/**
 * ARGV[2]: chunks to move, ARGV[3]: ITEMS_EVENTS_KEPT. Makes the layout exist (turning an earlier version's list into the
 * legacy list), and moves up to that many chunks' worth of names in.
 */
const migrateStepScript = script(
  `${DECLARED}
${KEYS}
${eventsKeptFrom(3)}
${EVENTS_EMIT}
${PRELUDE}
if not ensure() then return '${NO_LAYOUT}' end
local moved = migrate(tonumber(ARGV[2]))
return {moved, redis.call('LLEN', legacy)}`,
  3,
  (parser, keys: ListKeys, listId: string, chunks: number, eventsKept = DEFAULT_EVENTS_KEPT) => {
    parser.pushKeys(layoutKeys(keys))
    parser.push(listId, String(chunks), String(eventsKept))
  },
  (reply): MigrationProgress | typeof NO_LAYOUT => {
    if (reply === NO_LAYOUT) return NO_LAYOUT
    const [moved, left] = reply as [number, number]
    return { moved, left }
  },
)

/**
 * Changes nothing: how the header and the index disagree; NO_LAYOUT when they agree but the layout
 * is still to be made (no list, or an earlier version's at the key); '' when all is well.
 */
const checkScript = script(
  `${DECLARED} flags=no-writes
${KEYS}
local EVENTS_KEPT = nil
${EVENTS_EMIT}
${PRELUDE}
local reason = diagnose()
if reason then return reason end
if redis.call('TYPE', index).ok ~= 'zset' then return '${NO_LAYOUT}' end
return ''`,
  3,
  (parser, keys: ListKeys) => parser.pushKeys(layoutKeys(keys)),
  (reply) => String(reply),
)

/**
 * ARGV[1]: the new list's id, ARGV[2]: the highest chunk number a SCAN found, ARGV[3]:
 * ITEMS_EVENTS_KEPT. Its event (a reset) is written with it: the events stream is kept, so that
 * a watcher's next event says the list was replaced.
 *
 * Empties the list whatever state its keys are in: a new, empty list with a new id (so cursors
 * into the old one are refused) takes the place of the index, the header and the legacy list at
 * once. Its chunk numbers go on from the highest the old list may have used (the header's, the
 * index's, or the highest of the chunk keys found), which it returns: no append lands in an old
 * chunk, and the old chunks, numbered up to it, are no read's any more; they are deleted
 * afterwards, a batch at a time, while appends go to new ones.
 */
const resetScript = script(
  `${DECLARED} flags=allow-oom
${KEYS}
${eventsKeptFrom(3)}
${EVENTS_EMIT}
local tail = math.max(tonumber(redis.call('HGET', header, 'tail')) or 0, tonumber(ARGV[2]))
if redis.call('TYPE', index).ok == 'zset' then
  local last = redis.call('ZRANGE', index, '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 2)
  for _, member in ipairs(last) do tail = math.max(tail, tonumber(member) or 0) end
end
redis.call('DEL', index, header, legacy)
redis.call('ZADD', index, '-inf', '${ID_PREFIX}' .. ARGV[1])
redis.call('HSET', header, 'count', 0, 'id', ARGV[1], 'tail', tail, 'fill', ${CHUNK_NAMES})
emit('${EVENT_RESET}', {})
return tail`,
  3,
  (parser, keys: ListKeys, listId: string, highestFound: number, eventsKept = DEFAULT_EVENTS_KEPT) => {
    parser.pushKeys(layoutKeys(keys))
    parser.push(listId, String(highestFound), String(eventsKept))
  },
  (reply) => Number(reply),
)

/** The Lua scripts the store's connection must be opened with (`createRedisConnection`'s `scripts`). */
export const ITEM_STORE_SCRIPTS = {
  appendGroup: appendGroupScript,
  removeStep: removeStepScript,
  migrateStep: migrateStepScript,
  check: checkScript,
  reset: resetScript,
  ...EVENTS_READ_SCRIPTS,
}
export type ItemStoreScripts = typeof ITEM_STORE_SCRIPTS
