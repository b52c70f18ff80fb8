import { createHash } from 'node:crypto'
import { defineScript, type CommandParser, type RedisScripts } from 'redis'

/**
 * How the list is laid out in Redis (docs/list.md, "How the list is kept"). Under `ITEMS_KEY`:
 *
 * - `<key>`, the index: a sorted set of the chunks' numbers (score = number), in list order; also
 *   `id:<list id>` at -inf (so that a cursor can name its list, and the set is never empty) and,
 *   while an earlier version's list is being moved in, `legacy` at +inf.
 * - `<key>:chunk:<n>`: a Redis list of up to CHUNK_NAMES names. A deleted name becomes a tombstone
 *   (the empty string, never a name) and the names after it keep their positions, so a reader
 *   holding (chunk, offset) never skips nor repeats one; a chunk with nothing but tombstones goes.
 * - `<key>:header`: a hash of `count` (names in the list), `tail` (the last chunk's number),
 *   `fill` (how many names that chunk has had; CHUNK_NAMES when the next append opens a new one)
 *   and, while an earlier version's list is being moved in, `legacy`.
 * - `<key>:legacy`: the list an earlier version kept at `<key>` (`RPUSH`), moved into chunks
 *   from its head a batch at a time. Until it is empty, appends go to its tail, after it.
 *
 * Every command a script sends is O(one chunk); reads are plain `LRANGE`s of whole chunks.
 */
export const CHUNK_NAMES = 1_000

/** A deleted name's place in its chunk. */
const TOMBSTONE = ''

export interface ListKeys {
  index: string
  header: string
  legacy: string
  chunk(number: number): string
  /** The lock a delete holds while it takes more than one step. */
  deleting(nameHash: string): string
  /** The record of an append made under an idempotency key. */
  idempotency(key: string): string
}

/**
 * What identifies a name in the keys and records: a delete's lock is named after it, and an
 * idempotency record holds it (the only field an append reads: other fields are ignored, so a
 * body that differs only by them is the same request). Hashed so that both stay small whatever
 * the name.
 */
export function nameFingerprint(name: string): string {
  return createHash('sha256').update(name).digest('base64url')
}

export function listKeys(key: string): ListKeys {
  return {
    index: key,
    header: `${key}:header`,
    legacy: `${key}:legacy`,
    chunk: (number) => `${key}:chunk:${number}`,
    deleting: (nameHash) => `${key}:deleting:${nameHash}`,
    idempotency: (idempotencyKey) => `${key}:idempotency:${idempotencyKey}`,
  }
}

/** The keys every script is given first (PRELUDE's KEYS[1] to KEYS[3]). */
export type LayoutKeys = [index: string, header: string, legacy: string]

export function layoutKeys(keys: ListKeys): LayoutKeys {
  return [keys.index, keys.header, keys.legacy]
}

/** The index's members that are not chunks. */
const ID_PREFIX = 'id:'
const LEGACY_MEMBER = 'legacy'

/** The header's fields a read asks for (the scripts write them all). */
export const HEADER_ID = 'id'
export const HEADER_COUNT = 'count'
/**
 * The header's fields that no write of names leaves as they were nor ever brings back, while no
 * earlier version's list is moving in (`legacy` set; docs/list.md, "A short list read again"): an
 * append moves `tail` and `fill` on, and neither goes back; a delete lowers `count`; a reset
 * gives a new `id`. Reads take them by place: the id first, `legacy` last.
 */
export const HEADER_VERSION = [HEADER_ID, HEADER_COUNT, 'tail', 'fill', LEGACY_MEMBER]

/** A new list's first chunk: a fresh read guesses it before it knows better. */
export const FIRST_CHUNK = 1

/** The index's member that names the list `listId`. */
export function idMember(listId: string): string {
  return `${ID_PREFIX}${listId}`
}

/**
 * Where a read of the index starts, by score: from a chunk's number, or from the start (-inf),
 * which takes in the `id:` member and so the list's id.
 */
export function indexStart(chunk: number | undefined): number | '-inf' {
  return chunk ?? '-inf'
}

/** What a run of the index's members says, in the order `ZRANGE … BYSCORE` gave them. */
export interface IndexMembers {
  /** The list's id, when the run began at -inf. */
  listId: string | undefined
  /** The chunks' numbers, in list order. */
  chunks: number[]
  /** An earlier version's list is still being moved in, after the last chunk. */
  legacy: boolean
}

export function decodeIndex(members: readonly string[]): IndexMembers {
  const decoded: IndexMembers = { listId: undefined, chunks: [], legacy: false }
  for (const member of members) {
    if (member.startsWith(ID_PREFIX)) decoded.listId = member.slice(ID_PREFIX.length)
    else if (member === LEGACY_MEMBER) decoded.legacy = true
    else decoded.chunks.push(Number(member))
  }
  return decoded
}

/**
 * The `count` chunk numbers from `first` on: numbers run on, but for chunks deleted whole, so
 * these are the chunks a read guesses it will find (the index says which exist).
 */
export function chunksFrom(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, index) => first + index)
}

/**
 * The chunk an earlier version's list is moved into next, after `last` (0: none yet): the
 * legacy list lies past the last chunk.
 */
export function chunkAfter(last: number): number {
  return last + 1
}

/** A chunk's entry that stands for a deleted name. */
export function isTombstone(entry: string): boolean {
  return entry === TOMBSTONE
}

/** A chunk's live names: its entries without the tombstones of deleted ones. */
export function liveNames(entries: string[]): string[] {
  return entries.includes(TOMBSTONE) ? entries.filter((entry) => entry !== TOMBSTONE) : entries
}

/**
 * Every script's first line. Declared (shebang) scripts are refused whole when Redis is out of
 * memory, where an undeclared one would run until its first command that may grow memory: a
 * migration step that had popped names from the legacy list and was then refused their chunk
 * would lose them.
 */
const DECLARED = '#!lua'

/**
 * The error reply of a script that found the header and the index disagreeing: whatever it would
 * write could land where no read looks, so it refuses (docs/list.md, "When the keys disagree").
 */
export const INCONSISTENT = 'INCONSISTENT'

/**
 * Lua shared by every script. KEYS[1] is the index, KEYS[2] the header, KEYS[3] the legacy list
 * (`layoutKeys`); ARGV[1] a fresh list id,
 * used only when the list does not exist yet. The header keeps the list's id too (`id`), so that
 * one O(1) `ZSCORE` tells whether the index is still the one the header counts for.
 *
 * `diagnose()` says how the header and the index disagree, if they do: a header without its index
 * (`DEL ITEMS_KEY`), an index without its `id:` member or without its header, a plain list at the
 * key beside the header or beside a legacy list, chunks without their index and header. `refuseInconsistent()` refuses those (an error
 * reply starting INCONSISTENT), before anything is written. `ensure()` refuses them too, and
 * otherwise makes the layout exist: it turns an earlier version's list at the index's key into
 * the legacy list (one O(1) RENAME: from then on that version's commands meet a sorted set and
 * fail, rather than act on part of the list), gives a new list its id, and copies into the header
 * the id of an index made before the header kept it; it answers false, having written nothing,
 * when the layout must be made and ARGV[1] is '' (an append sent without an id). `migrate(chunks)` moves up to that many
 * chunks' worth of names from the legacy list's head into new chunks, and clears `legacy` from the
 * index and the header once it is empty. `append(name, maxCount)` is four O(1) commands (the
 * header read, the index's id checked, the push, the header written): a hot path, and Redis's
 * time is everyone's; COMMON_APPEND, below, runs the same four before this prelude is made.
 */
const PRELUDE = `
local index, header, legacy = KEYS[1], KEYS[2], KEYS[3]
local CHUNK_NAMES = ${CHUNK_NAMES}
-- Chunk keys are built here, not given in KEYS: which chunks a script touches is known only as it runs, so it cannot declare them, and the store cannot run on Redis Cluster.
local function chunk(n) return index .. ':chunk:' .. n end

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
    -- A new list would number its chunks from 1, among them.
    if redis.call('EXISTS', chunk(1)) == 1 then return 'the index and the header are gone, and ' .. chunk(1) .. ' is still there' end
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
  -- An append sends no id: the list exists nearly always, and a fresh id per append is work for
  -- nothing. It answers 'nolayout' instead, and is sent again with one.
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
    redis.call('HDEL', header, '${LEGACY_MEMBER}')
  end
  redis.call('HSET', header, 'tail', tail, 'fill', fill)
  return moved
end

-- 'full' at the cap (maxCount, ITEMS_MAX_COUNT); 'nolayout' when the layout must be made and ARGV[1] holds no id; else
-- appends the name, after the names an earlier version's list still holds.
local function append(name, maxCount)
  local at = redis.call('HMGET', header, 'count', 'tail', 'fill', '${LEGACY_MEMBER}', 'id')
  -- The index still holds the header's id: it was neither deleted nor replaced. pcall: a plain
  -- list at the key answers WRONGTYPE, which ensure() names.
  local score = at[5] and redis.pcall('ZSCORE', index, '${ID_PREFIX}' .. at[5])
  if type(score) ~= 'string' then
    if not ensure() then return 'nolayout' end
    at = redis.call('HMGET', header, 'count', 'tail', 'fill', '${LEGACY_MEMBER}')
  end
  local count, tail, fill = tonumber(at[1]), tonumber(at[2]), tonumber(at[3])
  if count >= maxCount then return 'full' end
  if at[4] then
    redis.call('RPUSH', legacy, name)
    redis.call('HSET', header, 'count', count + 1)
    return 'appended'
  end
  if fill >= CHUNK_NAMES then
    tail, fill = tail + 1, 0
    redis.call('ZADD', index, tail, tail)
  end
  redis.call('RPUSH', chunk(tail), name)
  redis.call('HSET', header, 'count', count + 1, 'tail', tail, 'fill', fill + 1)
  return 'appended'
end
`

/**
 * The common append, run before PRELUDE (whose functions cost each call their making): the
 * header read, the index's id checked (one ZSCORE), the push, the header's count and fill written.
 * It takes only the case where append() would go straight to the same writes: a header with its id,
 * an index that holds it, no earlier version's list to move in. Anything else (no layout, keys that
 * disagree, a legacy list) leaves `outcome` nil, and the script goes on to append(), which reads
 * again and decides. ARGV[2]: the name, ARGV[3]: ITEMS_MAX_COUNT.
 */
const COMMON_APPEND = `
local outcome
local at = redis.call('HMGET', KEYS[2], 'count', 'tail', 'fill', '${LEGACY_MEMBER}', 'id')
if at[5] and not at[4] and type(redis.pcall('ZSCORE', KEYS[1], '${ID_PREFIX}' .. at[5])) == 'string' then
  local count, tail, fill = tonumber(at[1]), tonumber(at[2]), tonumber(at[3])
  if count >= tonumber(ARGV[3]) then
    outcome = 'full'
  elseif fill >= ${CHUNK_NAMES} then
    tail = tail + 1
    redis.call('ZADD', KEYS[1], tail, tail)
    redis.call('RPUSH', KEYS[1] .. ':chunk:' .. tail, ARGV[2])
    redis.call('HSET', KEYS[2], 'count', count + 1, 'tail', tail, 'fill', 1)
    outcome = 'appended'
  else
    redis.call('RPUSH', KEYS[1] .. ':chunk:' .. tail, ARGV[2])
    redis.call('HSET', KEYS[2], 'count', count + 1, 'fill', fill + 1)
    outcome = 'appended'
  end
end
`

/** What became of an append. */
export type AppendOutcome = 'appended' | 'full'
/** What became of an append made under an idempotency key. */
export type OnceOutcome = AppendOutcome | 'replayed' | 'conflict'
/** An append sent without a list id found no layout: nothing was written; it is to be sent again with one. */
export const NO_LAYOUT = 'nolayout'

/**
 * What every append of one list sends alike, built once (`appendArguments`): its keys and
 * ITEMS_MAX_COUNT as text.
 */
export interface AppendArguments {
  keys: LayoutKeys
  maxCount: string
}

export function appendArguments(keys: ListKeys, maxCount: number): AppendArguments {
  return { keys: layoutKeys(keys), maxCount: String(maxCount) }
}

interface AppendScript {
  parseCommand(this: void, parser: CommandParser, list: AppendArguments, listId: string, name: string): void
  transformReply(this: void, reply: unknown): AppendOutcome | typeof NO_LAYOUT
}

/**
 * ARGV[1]: a list id, or '' for none (the common case: it answers 'nolayout' when it would have to
 * make the layout, having written nothing). ARGV[2]: the name, ARGV[3]: ITEMS_MAX_COUNT. Refuses
 * (`full`) a list at its cap.
 */
const APPEND: RedisScripts[string] & AppendScript = defineScript({
  SCRIPT: `${DECLARED}
${COMMON_APPEND}
if outcome then return outcome end
${PRELUDE}
return append(ARGV[2], tonumber(ARGV[3]))
`,
  NUMBER_OF_KEYS: 3,
  parseCommand(parser: CommandParser, list: AppendArguments, listId: string, name: string) {
    parser.pushKeys(list.keys)
    parser.push(listId, name, list.maxCount)
  },
  transformReply: (reply: unknown) => String(reply) as AppendOutcome | typeof NO_LAYOUT,
})

interface AppendOnceScript {
  parseCommand(this: void, parser: CommandParser, list: AppendArguments, listId: string, name: string, record: string, fingerprint: string, ttlSeconds: string): void
  transformReply(this: void, reply: unknown): OnceOutcome | typeof NO_LAYOUT
}

/**
 * KEYS[4]: the key's record. ARGV[2]: the name, ARGV[3]: ITEMS_MAX_COUNT, ARGV[4]: the name's
 * fingerprint, ARGV[5]: the record's lifetime (s). The record is read first, so that a retry of
 * an append stored before the list filled up still gets its first answer. One script: the append
 * and its record are stored together or not at all, and the append-only file keeps them together
 * across a crash. A replay rewrites the record as it is, so that a `WAIT` after it waits for the
 * replicas to hold the record, wherever the first append was made.
 */
const APPEND_ONCE: RedisScripts[string] & AppendOnceScript = defineScript({
  SCRIPT: `${DECLARED}
local recorded = redis.call('GET', KEYS[4])
if recorded then
  if recorded ~= ARGV[4] then return 'conflict' end
  ${PRELUDE}
  -- A replay's 201 says too that a read shows the name.
  refuseInconsistent()
  redis.call('SET', KEYS[4], recorded, 'KEEPTTL')
  return 'replayed'
end
${COMMON_APPEND}
if not outcome then
  ${PRELUDE}
  outcome = append(ARGV[2], tonumber(ARGV[3]))
end
if outcome == 'appended' then redis.call('SET', KEYS[4], ARGV[4], 'EX', ARGV[5]) end
return outcome
`,
  NUMBER_OF_KEYS: 4,
  parseCommand(parser: CommandParser, list: AppendArguments, listId: string, name: string, record: string, fingerprint: string, ttlSeconds: string) {
    parser.pushKeys([...list.keys, record])
    parser.push(listId, name, list.maxCount, fingerprint, ttlSeconds)
  },
  transformReply: (reply: unknown) => String(reply) as OnceOutcome | typeof NO_LAYOUT,
})

/**
 * How a delete step went: `busy` while another delete of the name holds its lock; `lost` when a
 * step after the first finds the lock expired or another delete's, and so did nothing; `more`
 * with where the next step goes on; `done`.
 */
export type DeleteProgress = { state: 'busy' } | { state: 'lost' } | { state: 'done'; removed: number } | { state: 'more'; removed: number; from: number }

interface RemoveStepScript {
  parseCommand(
    this: void,
    parser: CommandParser,
    keys: ListKeys,
    listId: string,
    lock: string,
    name: string,
    token: string,
    from: number,
    budgetMicros: number,
    lockMs: number,
    continuing: boolean,
  ): void
  transformReply(this: void, reply: unknown): DeleteProgress
}

/**
 * KEYS[4]: the name's delete lock. ARGV[2]: the name, ARGV[3]: this delete's token, ARGV[4]: the
 * first chunk number to look at, ARGV[5]: the step's budget (µs, by Redis's own clock), ARGV[6]:
 * the lock's lifetime (ms), ARGV[7]: 1 for a step after this delete's first.
 *
 * Turns every occurrence of the name in the chunks from ARGV[4] on into a tombstone (`LPOS … COUNT 0`
 * finds them, `LSET` replaces them: the chunk's other names keep their places), drops chunks left
 * with nothing but tombstones, moves the legacy list in when the chunks run out, and stops when its
 * budget is spent. It may run while Redis is out of memory (allow-oom): a delete frees memory, and
 * a full Redis is when a delete is most wanted. A delete that needs more than one step holds the
 * name's lock from its first to its last, so that a concurrent delete of the same name waits
 * (`busy`) and then finds nothing: of concurrent deletes of one name exactly one removes it,
 * however long the list.
 *
 * The lock is a lease: a holder paused past it (a long GC, a frozen container) may find on its
 * next step that another delete has run meanwhile. That step does nothing and answers `lost`: the
 * holder cannot tell whether the occurrences it removed were all there were, nor whether another
 * delete answered for them, so it must not report them (docs/list.md, "Deletes that lose their lock").
 */
const REMOVE_STEP: RedisScripts[string] & RemoveStepScript = defineScript({
  SCRIPT: `${DECLARED} flags=allow-oom
${PRELUDE}
ensure()
local lock, name, token, from = KEYS[4], ARGV[2], ARGV[3], tonumber(ARGV[4])
local holder = redis.call('GET', lock)
if ARGV[7] == '1' then
  if holder ~= token then return {'lost'} end
elseif holder then
  return {'busy'}
end
local function now() local t = redis.call('TIME'); return t[1] * 1000000 + t[2] end
local deadline = now() + tonumber(ARGV[5])
local removed, finished = 0, false
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
    for _, at in ipairs(found) do redis.call('LSET', key, at, '') end
    removed = removed + #found
    if #found > 0 and #redis.call('LPOS', key, '', 'COUNT', 0) == redis.call('LLEN', key) then
      redis.call('DEL', key)
      redis.call('ZREM', index, member)
      -- The next append must not write into the chunk again: a reader may hold a place in it.
      if n == tonumber(redis.call('HGET', header, 'tail')) then redis.call('HSET', header, 'fill', CHUNK_NAMES) end
    end
    from = n + 1
    if now() >= deadline then break end
  end
end
if removed > 0 then redis.call('HINCRBY', header, 'count', -removed) end
if finished then
  if holder then redis.call('DEL', lock) end
  return {'done', removed}
end
redis.call('SET', lock, token, 'PX', ARGV[6])
return {'more', removed, from}
`,
  NUMBER_OF_KEYS: 4,
  parseCommand(
    parser: CommandParser,
    keys: ListKeys,
    listId: string,
    lock: string,
    name: string,
    token: string,
    from: number,
    budgetMicros: number,
    lockMs: number,
    continuing: boolean,
  ) {
    parser.pushKeys([...layoutKeys(keys), lock])
    parser.push(listId, name, token, String(from), String(budgetMicros), String(lockMs), continuing ? '1' : '0')
  },
  transformReply(reply: unknown): DeleteProgress {
    const [state, removed, from] = reply as [string, number?, number?]
    if (state === 'busy' || state === 'lost') return { state }
    if (state === 'done') return { state, removed: Number(removed) }
    return { state: 'more', removed: Number(removed), from: Number(from) }
  },
})

/** What a migration step moved, and how many names are left to move. */
export interface MigrationProgress {
  moved: number
  left: number
}

interface MigrateStepScript {
  parseCommand(this: void, parser: CommandParser, keys: ListKeys, listId: string, chunks: number): void
  transformReply(this: void, reply: unknown): MigrationProgress
}

/**
 * ARGV[2]: chunks to move. Makes the layout exist (turning an earlier version's list into the
 * legacy list), and moves up to that many chunks' worth of names in.
 */
const MIGRATE_STEP: RedisScripts[string] & MigrateStepScript = defineScript({
  SCRIPT: `${DECLARED}
${PRELUDE}
ensure()
local moved = migrate(tonumber(ARGV[2]))
return {moved, redis.call('LLEN', legacy)}
`,
  NUMBER_OF_KEYS: 3,
  parseCommand(parser: CommandParser, keys: ListKeys, listId: string, chunks: number) {
    parser.pushKeys(layoutKeys(keys))
    parser.push(listId, String(chunks))
  },
  transformReply(reply: unknown): MigrationProgress {
    const [moved, left] = reply as [number, number]
    return { moved, left }
  },
})

interface CheckScript {
  parseCommand(this: void, parser: CommandParser, keys: ListKeys): void
  transformReply(this: void, reply: unknown): string | undefined
}

/** Changes nothing: how the header and the index disagree, or nothing when they agree. */
const CHECK: RedisScripts[string] & CheckScript = defineScript({
  SCRIPT: `${DECLARED} flags=no-writes
${PRELUDE}
return diagnose() or ''
`,
  NUMBER_OF_KEYS: 3,
  parseCommand(parser: CommandParser, keys: ListKeys) {
    parser.pushKeys(layoutKeys(keys))
  },
  transformReply: (reply: unknown) => (reply === '' ? undefined : String(reply)),
})

interface ResetScript {
  parseCommand(this: void, parser: CommandParser, keys: ListKeys, listId: string): void
  transformReply(this: void, reply: unknown): number
}

/**
 * Empties the list whatever state its keys are in: a new, empty list with a new id (so cursors
 * into the old one are refused) takes the place of the index, the header and the legacy list at
 * once. Chunk numbers go on from the highest the old list used (the header's, the index's, or
 * the last of the chunks that follow it), which it returns: the old chunks, numbered up to it, are no read's any more and are deleted
 * afterwards, a batch at a time, while appends go to new ones.
 */
const RESET: RedisScripts[string] & ResetScript = defineScript({
  SCRIPT: `${DECLARED} flags=allow-oom
${PRELUDE}
local tail = tonumber(redis.call('HGET', header, 'tail')) or 0
if redis.call('TYPE', index).ok == 'zset' then
  local last = redis.call('ZRANGE', index, '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 2)
  for _, member in ipairs(last) do tail = math.max(tail, tonumber(member) or 0) end
end
-- Chunks left without their header and index: the run of them from the first.
while redis.call('EXISTS', chunk(tail + 1)) == 1 do tail = tail + 1 end
redis.call('DEL', index, header, legacy)
redis.call('ZADD', index, '-inf', '${ID_PREFIX}' .. ARGV[1])
redis.call('HSET', header, 'count', 0, 'id', ARGV[1], 'tail', tail, 'fill', CHUNK_NAMES)
return tail
`,
  NUMBER_OF_KEYS: 3,
  parseCommand(parser: CommandParser, keys: ListKeys, listId: string) {
    parser.pushKeys(layoutKeys(keys))
    parser.push(listId)
  },
  transformReply: (reply: unknown) => Number(reply),
})

/** The Lua scripts the store's connection must be opened with (`createRedisConnection`'s `scripts`). */
export type ItemStoreScripts = {
  append: typeof APPEND
  appendOnce: typeof APPEND_ONCE
  removeStep: typeof REMOVE_STEP
  migrateStep: typeof MIGRATE_STEP
  check: typeof CHECK
  reset: typeof RESET
}
export const ITEM_STORE_SCRIPTS: ItemStoreScripts = {
  append: APPEND,
  appendOnce: APPEND_ONCE,
  removeStep: REMOVE_STEP,
  migrateStep: MIGRATE_STEP,
  check: CHECK,
  reset: RESET,
}
