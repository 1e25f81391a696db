/**
 * The fleet breaker's one Lua script: `core/breakerFleet.ts` `step`, line for line (the Redis tests compare
 * the two, operation for operation; keep them in step). Every operation reads the fleet state, applies the lazy
 * open → half-open move (at the caller's `now`), does its part, saves, publishes a transition on the
 * breaker's channel, and replies `{granted, inc, epoch, state, openUntil, isolated, openings, changedAt,
 * halfOpenUntil}`. Replicas take their state from that reply only; the message is a prompt to ask.
 *
 * KEYS[1] the state hash `<prefix>{<name>}`; KEYS[2] the window `<prefix>{<name>}:w:<policy>` (same hash
 * tag, so one Cluster slot; one per trip policy, `keysOf`, so replicas with another policy never read it): a
 * string (the run of failures, consecutive), a list of `calls:failures:slow` chunks, newest first (count
 * window), or a hash of `c<bucket>`, `f<bucket>`, `s<bucket>` counters (time window).
 *
 * ARGV: 1 op (flush | acquire | release | success | failure | isolate | reset), 2 now, 3 the epoch the
 * caller's deltas or trial belong to (-1: none known), 4 the caller's token (a new state's incarnation is
 * `<token>.<now>`, one of its own at every creation),
 * 5 channel, 6 the openFor delay of the next opening, 7 the longest openForAtLeast asked, 8 halfOpenPermits,
 * 9 trial lease (ms), 10..15 the trip policy (`core/breakerFleet.ts` policyArgs), 16..20 the deltas
 * (calls, failures, slow, trailing failures, saw a success), 21 the incarnation ARGV[3]'s epoch belongs to
 * (another than the state's: the epoch counts as -1), 22 the current half-open period's timeout (ms).
 */
import * as redis from "../redis/client.js"

export const fleetScript = redis.script(`
local function num(x) return string.format("%.17g", x) end
local H, W = KEYS[1], KEYS[2]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local known = tonumber(ARGV[3])
local v = redis.call("HMGET", H, "inc", "epoch", "state", "until", "iso", "openings", "at", "taken", "succ", "lease",
  "hou", "hoe")
local inc = v[1]
local dirty = false
-- each creation of the state is an incarnation of its own, even by the same replica: its epochs start over
if not inc then inc = ARGV[4] .. "." .. ARGV[2]; dirty = true end
-- an epoch of another incarnation is no epoch of this one
if known ~= -1 and ARGV[21] ~= inc then known = -1 end
local epoch = tonumber(v[2]) or 0
local state = v[3] or "closed"
local untilT = tonumber(v[4]) or 0
local iso = v[5] or "0"
local openings = tonumber(v[6]) or 0
local at = tonumber(v[7]) or 0
local taken = tonumber(v[8]) or 0
local succ = tonumber(v[9]) or 0
local lease = tonumber(v[10]) or 0
-- the half-open period's deadline and the epoch it was set in (one another version left behind is none)
local hou = tonumber(v[11]) or 0
local hoe = tonumber(v[12]) or -1
local publish = false
local granted = 0
local permits = tonumber(ARGV[8])

local function enter(to, t)
  epoch = epoch + 1
  state = to
  at = t
  taken = 0
  succ = 0
  lease = 0
  dirty = true
  publish = true
end
local function open(t, asked)
  enter("open", t)
  openings = openings + 1
  untilT = t + math.max(tonumber(ARGV[6]), asked)
  redis.call("DEL", W)
end
local function close()
  enter("closed", now)
  openings = 0
  iso = "0"
  redis.call("DEL", W)
end
-- an open breaker whose time is up is half-open, whoever notices it first
local function lazyHalfOpen()
  if state == "open" and iso == "0" and now >= untilT then enter("half-open", now) end
end

lazyHalfOpen()
-- a half-open period whose trials have not all ended by its deadline opens again, as of that deadline
if state == "half-open" and hoe == epoch and taken > succ and now >= hou then
  open(hou, 0)
  lazyHalfOpen()
end

if op == "flush" then
  local calls = tonumber(ARGV[16])
  if state == "closed" and calls > 0 and (known == -1 or known == epoch) then
    local kind = ARGV[10]
    local tripped = false
    if kind == "c" then
      local run = tonumber(redis.call("GET", W) or "0")
      if ARGV[20] == "1" then run = tonumber(ARGV[19]) else run = run + tonumber(ARGV[19]) end
      redis.call("SET", W, run, "PX", 86400000)
      tripped = run >= tonumber(ARGV[11])
    else
      local c, f, s = 0, 0, 0
      if kind == "n" then
        local size = tonumber(ARGV[11])
        redis.call("LPUSH", W, ARGV[16] .. ":" .. ARGV[17] .. ":" .. ARGV[18])
        local items = redis.call("LRANGE", W, 0, -1)
        for i, item in ipairs(items) do
          local i1 = string.find(item, ":", 1, true)
          local i2 = string.find(item, ":", i1 + 1, true)
          local a = tonumber(string.sub(item, 1, i1 - 1))
          local b = tonumber(string.sub(item, i1 + 1, i2 - 1))
          local d = tonumber(string.sub(item, i2 + 1))
          if c + a >= size then
            -- the oldest chunk still in the window counts in proportion to the part of it that fits
            local k = (size - c) / a
            c = size
            f = f + b * k
            s = s + d * k
            redis.call("LTRIM", W, 0, i - 1)
            break
          end
          c = c + a
          f = f + b
          s = s + d
        end
        redis.call("PEXPIRE", W, 86400000)
      else
        local bm = tonumber(ARGV[11])
        local size = tonumber(ARGV[12])
        local b = math.floor(now / bm)
        redis.call("HINCRBY", W, "c" .. b, calls)
        if tonumber(ARGV[17]) > 0 then redis.call("HINCRBY", W, "f" .. b, ARGV[17]) end
        if tonumber(ARGV[18]) > 0 then redis.call("HINCRBY", W, "s" .. b, ARGV[18]) end
        local all = redis.call("HGETALL", W)
        for i = 1, #all, 2 do
          local name = all[i]
          local idx = tonumber(string.sub(name, 2))
          if idx <= b - size then
            redis.call("HDEL", W, name)
          else
            local n = tonumber(all[i + 1])
            local t = string.sub(name, 1, 1)
            if t == "c" then c = c + n elseif t == "f" then f = f + n else s = s + n end
          end
        end
        redis.call("PEXPIRE", W, math.ceil(bm * size) + 60000)
      end
      local slowRate = tonumber(ARGV[15])
      tripped = c >= tonumber(ARGV[14]) and c > 0 and
        (f / c >= tonumber(ARGV[13]) or (slowRate > 0 and s / c >= slowRate))
    end
    if tripped then open(now, tonumber(ARGV[7])) end
  end
elseif op == "acquire" then
  if state == "half-open" then
    -- permits of trials that never reported (their replica died) are freed when their lease runs out
    if taken >= permits and now >= lease then taken = succ end
    if taken < permits then
      -- the period's clock starts with its first trial (again, when every trial before gave its permit back)
      if taken == 0 or hoe ~= epoch then
        hou = now + tonumber(ARGV[22])
        hoe = epoch
      end
      taken = taken + 1
      lease = now + tonumber(ARGV[9])
      granted = 1
      dirty = true
    end
  end
elseif op == "release" then
  if state == "half-open" and known == epoch and taken > succ then
    taken = taken - 1
    dirty = true
  end
elseif op == "success" then
  if state == "half-open" and known == epoch then
    succ = succ + 1
    dirty = true
    if succ >= permits then close() end
  end
elseif op == "failure" then
  if state == "half-open" and known == epoch then open(now, tonumber(ARGV[7])) end
elseif op == "isolate" then
  if iso ~= "1" then
    if state ~= "open" then enter("open", now) end
    iso = "1"
    dirty = true
    publish = true
  end
elseif op == "reset" then
  close()
end

if dirty then
  redis.call("HSET", H, "inc", inc, "epoch", epoch, "state", state, "until", num(untilT), "iso", iso,
    "openings", openings, "at", num(at), "taken", taken, "succ", succ, "lease", num(lease), "hou", num(hou),
    "hoe", hoe)
end
-- renewed at every call, changed or not: a breaker in use keeps its state; an idle one's goes away a day
-- after its last call (or after it stops being open)
if iso == "1" then
  redis.call("PERSIST", H)
else
  redis.call("PEXPIRE", H, math.ceil(math.max(0, untilT - now)) + 86400000)
end
local running = state == "half-open" and hoe == epoch and taken > succ
local view = {inc, num(epoch), state, num(untilT), iso, num(openings), num(at), running and num(hou) or "0"}
if publish then redis.call("PUBLISH", ARGV[5], table.concat(view, "|")) end
return {granted, view[1], view[2], view[3], view[4], view[5], view[6], view[7], view[8]}
`)
