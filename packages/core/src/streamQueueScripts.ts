/**
 * The Lua scripts of the Redis stream queue (plain text, shared by both editions, so processes of either run the
 * same scripts on the same keys): each moves a message between the stream, the dead-letter stream and the index
 * atomically. KEYS and ARGV are described above each one.
 *
 * The hash `deliveries` (`<stream>:deliveries`) holds, per pending entry whose delivery was judged, released or
 * run alone, `<state>,<suspect>,<uncharged>`: how its current delivery stands (core/crashAttribution.ts), whether
 * it is a suspect (1), and how many of its deliveries were given back to it because they were lost beside
 * other handlers. Its receive count is the delivery count of the pending entries list less `uncharged`: the
 * delivery count itself only grows (it fences receipts), so a lost receive is given back here. An entry without
 * a field was read by `XREADGROUP` for a consumer that runs suspects alone and never judged: claimed, no
 * suspect, nothing given back (a plain `receive` stores its new entries as charged).
 */
import { CHARGED, CLAIMED, NOT_HELD } from "./crashAttribution.js"

// Reads an entry's field of the hash `deliveries`.
const DELIVERY = `
local function delivery(v)
  if not v then return ${CLAIMED}, 0, 0 end
  local state, suspect, uncharged = string.match(v, '^(%d+),(%d+),(%d+)$')
  return tonumber(state), tonumber(suspect), tonumber(uncharged)
end`

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
// KEYS stream, errors, deliveries; ARGV group, entry id, consumer, delivery count, idle, error, undo ('1').
// `attribution.release`: not held any more; unprocessed (undo) the suspicion is kept, else cleared.
export const RELEASE = `${DELIVERY}
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
local count = tonumber(ARGV[4])
if ARGV[7] == '1' and count > 0 then count = count - 1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[5], 'RETRYCOUNT', count, 'JUSTID')
if ARGV[6] ~= '' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[6]) end
local _, suspect, uncharged = delivery(redis.call('HGET', KEYS[3], ARGV[2]))
if ARGV[7] ~= '1' then suspect = 0 end
redis.call('HSET', KEYS[3], ARGV[2], '${NOT_HELD},' .. suspect .. ',' .. uncharged)
return 1`

// KEYS stream, dlq, index, errors, deliveries; ARGV group, entry id, consumer, delivery count, message id, fields.
export const DEAD_LETTER = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
redis.call('HDEL', KEYS[5], ARGV[2])
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

// KEYS stream, errors, deliveries; ARGV group, entry id, consumer, delivery count. Deletes the entry, its error
// and its delivery.
export const ACK = `${OWNED}
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
return 1`

// KEYS stream, errors, deliveries; ARGV group, consumer, then entry id and delivery count per ack. ACK for each entry
// (fenced each on its own; an entry given twice is acked once): a table of 1 (acked) or 0 (stale), in order.
// The fence is checked per entry, then the acked ones go in one XACK, one XDEL and one HDEL per hash (fewer calls:
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
  redis.call('HDEL', KEYS[3], unpack(ids))
end
return out`

// KEYS stream; ARGV group, entry id, consumer, delivery count. Resets the entry's idle time (one more
// visibility timeout before XAUTOCLAIM may take it over), keeping its owner and delivery count.
export const EXTEND = `${OWNED}
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', 0, 'RETRYCOUNT', ARGV[4], 'JUSTID')
return 1`

// KEYS stream, deliveries; ARGV group, entry id, consumer, delivery count. `attribution.runAlone`: the holder
// runs the handler alone from now, so a loss of this delivery is charged; and EXTEND's reset of the idle time
// (the handler may start late, once the others have ended).
export const MARK_ALONE = `${OWNED}
${DELIVERY}
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', 0, 'RETRYCOUNT', ARGV[4], 'JUSTID')
local _, suspect, uncharged = delivery(redis.call('HGET', KEYS[2], ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[2], '${CHARGED},' .. suspect .. ',' .. uncharged)
return 1`

// KEYS stream, errors, deliveries; ARGV group, consumer, visibility (ms), cursor, count, the state the new
// deliveries are stored in (`attribution.claimedState`). Takes over the entries
// pending longer than the visibility timeout (XAUTOCLAIM, which adds one to their delivery counts) and judges
// each one's previous delivery as `attribution.claim` does: lost while claimed, its receive is given back
// (`uncharged` + 1); lost while running alone, it is kept; lost either way, the message is a suspect. Returns
// the next cursor and, per entry: id, fields, delivery count, uncharged, suspect (0 or 1), its error or nil.
// Entries deleted meanwhile (XAUTOCLAIM drops them from the pending list) lose their error and delivery too.
export const RECLAIM = `${DELIVERY}
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local out = {}
for _, e in ipairs(r[2]) do
  if type(e) == 'table' and type(e[2]) == 'table' then
    local id = e[1]
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
    local count = 2
    if #p > 0 then count = tonumber(p[1][4]) end
    local state, suspect, uncharged = delivery(redis.call('HGET', KEYS[3], id))
    if state ~= ${NOT_HELD} then suspect = 1 end
    if state == ${CLAIMED} then uncharged = uncharged + 1 end
    redis.call('HSET', KEYS[3], id, ARGV[6] .. ',' .. suspect .. ',' .. uncharged)
    out[#out + 1] = { id, e[2], count, uncharged, suspect, redis.call('HGET', KEYS[2], id) }
  end
end
if r[3] then
  for _, id in ipairs(r[3]) do
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
  end
end
return { r[1], out }`
