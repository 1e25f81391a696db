/**
 * The Lua scripts of the Redis stream queue (plain text, shared by both editions, so processes of either run the
 * same scripts on the same keys): each moves a message between the stream, the dead-letter stream and the index
 * atomically. KEYS and ARGV are described above each one.
 */

// KEYS[1] stream; ARGV group. Creates the group at the start of the stream (and the stream), unless it exists.
export const CREATE_GROUP = `
local r = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(r) == 'table' and r.err then
  if string.find(r.err, 'BUSYGROUP', 1, true) then return 0 end
  return r
end
return 1`

// Fencing: a release or dead-letter applies only while the entry is pending for this consumer with the
// delivery count of the receipt; XAUTOCLAIM by anyone (ourselves included) bumps the count.
export const RELEASE = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
local count = tonumber(ARGV[4])
if ARGV[7] == '1' and count > 0 then count = count - 1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[5], 'RETRYCOUNT', count, 'JUSTID')
if ARGV[6] ~= '' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[6]) end
return 1`

export const DEAD_LETTER = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
local old = redis.call('HGET', KEYS[3], ARGV[5])
if old then redis.call('XDEL', KEYS[2], old) end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
local added = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('HSET', KEYS[3], ARGV[5], added)
return 1`

// The message id a DLQ entry carries (its own entry id when it has no id field).
const ENTRY_ID = `
local function entryId(f, at)
  for j = 1, #f, 2 do if f[j] == 'id' then return f[j + 1] end end
  return at
end`

// Copies a DLQ entry's id, key and body back to the source stream; returns its message id.
const MOVE_BACK = `
local function moveBack(f, at)
  local out = {}
  local id = at
  for j = 1, #f, 2 do
    if f[j] == 'id' then id = f[j + 1] end
    if f[j] == 'id' or f[j] == 'key' or f[j] == 'body' then
      out[#out + 1] = f[j]
      out[#out + 1] = f[j + 1]
    end
  end
  redis.call('XADD', KEYS[1], '*', unpack(out))
  return id
end`

// ARGV: message ids
export const REDRIVE = `${MOVE_BACK}
local n = 0
for i = 1, #ARGV do
  local at = redis.call('HGET', KEYS[3], ARGV[i])
  if at then
    local found = redis.call('XRANGE', KEYS[2], at, at)
    if #found > 0 then
      moveBack(found[1][2], at)
      n = n + 1
    end
    redis.call('XDEL', KEYS[2], at)
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
return n`

// Visits every DLQ entry of ARGV (entry ids, a page of a snapshot) that still exists in `stream`, telling the
// visitor whether the index at `index` points at it (a stale copy of a newer entry of the same message, or an
// entry written by hand, is not pointed at); sums what the visitor returns.
const EACH_ENTRY = `${ENTRY_ID}
local function eachEntry(stream, index, visit)
  local n = 0
  for i = 1, #ARGV do
    local at = ARGV[i]
    local found = redis.call('XRANGE', stream, at, at)
    if #found > 0 then
      local f = found[1][2]
      local id = entryId(f, at)
      n = n + visit(f, at, id, redis.call('HGET', index, id) == at)
    end
  end
  return n
end`

// Every entry that still exists leaves the DLQ, so every page makes progress: one the index points at is moved
// back; any other is deleted without being redriven.
export const REDRIVE_ENTRIES = `${MOVE_BACK}
${EACH_ENTRY}
return eachEntry(KEYS[2], KEYS[3], function(f, at, id, indexed)
  redis.call('XDEL', KEYS[2], at)
  if not indexed then return 0 end
  moveBack(f, at)
  redis.call('HDEL', KEYS[3], id)
  return 1
end)`

// ARGV: message ids
export const PURGE = `
local n = 0
for i = 1, #ARGV do
  local at = redis.call('HGET', KEYS[2], ARGV[i])
  if at then
    n = n + redis.call('XDEL', KEYS[1], at)
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return n`

// Each entry is deleted, with its index entry if that points at it.
export const PURGE_ENTRIES = `${EACH_ENTRY}
return eachEntry(KEYS[1], KEYS[2], function(f, at, id, indexed)
  if indexed then redis.call('HDEL', KEYS[2], id) end
  return redis.call('XDEL', KEYS[1], at)
end)`

// The fence of ACK and EXTEND, as in RELEASE: the entry is pending for this consumer with the receipt's count.
const OWNED = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end`

// KEYS stream, errors; ARGV group, entry id, consumer, delivery count. Deletes the entry and its error.
export const ACK = `${OWNED}
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return 1`

// KEYS stream, errors; ARGV group, consumer, then entry id and delivery count per ack. ACK for each entry
// (fenced each on its own; an entry given twice is acked once): a table of 1 (acked) or 0 (stale), in order.
// The fence is checked per entry, then the acked ones go in one XACK, one XDEL and one HDEL (fewer calls:
// each costs the server more than the work it does for one entry).
export const ACK_MANY = `
local out = {}
local ids = {}
local seen = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if seen[id] or #p == 0 or p[1][2] ~= ARGV[2] or tonumber(p[1][4]) ~= tonumber(ARGV[i + 1]) then
    out[#out + 1] = 0
  else
    seen[id] = true
    ids[#ids + 1] = id
    out[#out + 1] = 1
  end
end
if #ids > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('XDEL', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
end
return out`

// KEYS stream; ARGV group, entry id, consumer, delivery count. Resets the entry's idle time (one more
// visibility timeout before XAUTOCLAIM may take it over), keeping its owner and delivery count.
export const EXTEND = `${OWNED}
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', 0, 'RETRYCOUNT', ARGV[4], 'JUSTID')
return 1`
