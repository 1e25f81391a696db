/**
 * The fleet breaker's one Lua script (plain text, shared by both editions): `core/breakerFleetModel.ts` `step`, line for line (the Redis tests compare
 * the two, call for call; keep them in step). Every operation reads the fleet state, applies the lazy
 * open → half-open move (at the caller's `now`), does its part, saves, publishes a transition on the breaker's
 * channel, and replies whether a permit was granted and the fleet's view. Replicas take their state from that
 * reply only; the message is a prompt to ask.
 *
 * Its arguments and reply are the tables of `core/breakerFleetProtocol.ts`: the script reads `A.<name>` (a name
 * not in the table is an error, not a nil) and its reply and message are built from the same tables.
 *
 * KEYS[1] the state hash `<prefix>{<name>}`; KEYS[2] the window `<prefix>{<name>}:w:<policy>` (same hash
 * tag, so one Cluster slot; one per trip policy, `keysOf`, so replicas with another policy never read it): a
 * string (the run of failures, consecutive), a list of `calls:failures:slow` chunks, newest first (count
 * window), or a hash of `c<bucket>`, `f<bucket>`, `s<bucket>` counters (time window).
 */
import { viewFields } from "./breakerFleet.js"
import { args, replyFields } from "./breakerFleetProtocol.js"

const list = (names: ReadonlyArray<string>) => names.map((n) => `"${n}"`).join(", ")

// ARGV by name; reading a name the protocol does not have fails the script instead of giving nil
const prologue = `
local A = {}
do
  local names = {${list(args)}}
  if #ARGV ~= #names then error("fleet breaker script: " .. #ARGV .. " arguments, expected " .. #names) end
  for i, n in ipairs(names) do A[n] = ARGV[i] end
  setmetatable(A, {__index = function(_, k) error("fleet breaker script: no argument " .. tostring(k)) end})
end
`

const fields = (names: ReadonlyArray<string>) => names.map((n) => `R.${n}`).join(", ")

// R holds the reply by name; one the script did not set fails it (a nil would shorten the array)
const epilogue = `
setmetatable(R, {__index = function(_, k) error("fleet breaker script: no reply field " .. tostring(k)) end})
if publish then redis.call("PUBLISH", A.channel, table.concat({${fields(viewFields)}}, "|")) end
return {${fields(replyFields)}}
`

const body = `
local function num(x) return string.format("%.17g", x) end
local H, W = KEYS[1], KEYS[2]
local op = A.op
local now = tonumber(A.now)
local known = tonumber(A.epoch)
local v = redis.call("HMGET", H, "inc", "epoch", "state", "until", "iso", "openings", "at", "taken", "succ", "lease",
  "hou", "hoe", "hf", "ha")
local inc = v[1]
local dirty = false
-- each creation of the state is an incarnation of its own, even by the same replica: its epochs start over
if not inc then inc = A.token .. "." .. A.now; dirty = true end
-- an epoch of another incarnation is no epoch of this one
if known ~= -1 and A.inc ~= inc then known = -1 end
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
-- the period's failed trials (halfOpenFailureRate), and the longest openForAtLeast they asked for
local hf = tonumber(v[13]) or 0
local ha = tonumber(v[14]) or 0
local publish = false
local granted = 0
-- this call's counts or report opened the breaker (not a deadline, nor isolate)
local opened = 0
local permits = tonumber(A.permits)
local rate = tonumber(A.failureRate)

local function enter(to, t)
  epoch = epoch + 1
  state = to
  at = t
  taken = 0
  succ = 0
  hf = 0
  lease = 0
  ha = 0
  dirty = true
  publish = true
end
local function open(t, asked)
  enter("open", t)
  openings = openings + 1
  untilT = t + math.max(tonumber(A.delay), asked)
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
-- the trials of the half-open period that have not ended
local function running()
  if state == "half-open" and hoe == epoch then return taken - succ - hf end
  return 0
end
-- a trial of the period ended: the sample's verdict (core/breaker.ts halfOpenVerdict)
local function decide()
  if rate == 0 and hf > 0 then
    open(now, ha)
    opened = 1
  elseif succ + hf >= permits then
    if hf / permits < (rate == 0 and 1 or rate) then
      close()
    else
      open(now, ha)
      opened = 1
    end
  end
end

lazyHalfOpen()
-- a half-open period whose trials have not all ended by its deadline opens again, as of that deadline
if running() > 0 and now >= hou then
  open(hou, 0)
  lazyHalfOpen()
end

-- the caller's epoch names this period only if the period began when the caller's did
local current = known == epoch and tonumber(A.since) == at

if op == "flush" then
  local calls = tonumber(A.calls)
  if state == "closed" and calls > 0 and (known == -1 or current) then
    local kind = A.kind
    local tripped = false
    if kind == "c" then
      local run = tonumber(redis.call("GET", W) or "0")
      if A.sawSuccess == "1" then run = tonumber(A.trailing) else run = run + tonumber(A.trailing) end
      redis.call("SET", W, run, "PX", 86400000)
      tripped = run >= tonumber(A.p1)
    else
      local c, f, s = 0, 0, 0
      if kind == "n" then
        local size = tonumber(A.p1)
        redis.call("LPUSH", W, A.calls .. ":" .. A.failures .. ":" .. A.slow)
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
        local bm = tonumber(A.p1)
        local size = tonumber(A.p2)
        local b = math.floor(now / bm)
        redis.call("HINCRBY", W, "c" .. b, calls)
        if tonumber(A.failures) > 0 then redis.call("HINCRBY", W, "f" .. b, A.failures) end
        if tonumber(A.slow) > 0 then redis.call("HINCRBY", W, "s" .. b, A.slow) end
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
      local slowRate = tonumber(A.slowRate)
      tripped = c >= tonumber(A.minimumCalls) and c > 0 and
        (f / c >= tonumber(A.threshold) or (slowRate > 0 and s / c >= slowRate))
    end
    if tripped then
      open(now, tonumber(A.asked))
      opened = 1
    end
  end
elseif op == "acquire" then
  if state == "half-open" then
    -- permits of trials that never reported (their replica died) are freed when their lease runs out
    if taken >= permits and now >= lease then taken = succ + hf end
    if taken < permits then
      -- the period's clock starts with a trial granted while none of the period's runs
      if running() == 0 or hoe ~= epoch then
        hou = now + tonumber(A.trialTimeout)
        hoe = epoch
      end
      taken = taken + 1
      lease = now + tonumber(A.lease)
      granted = 1
      dirty = true
    end
  end
elseif op == "release" then
  if state == "half-open" and current and taken > succ + hf then
    taken = taken - 1
    dirty = true
  end
elseif op == "success" then
  if state == "half-open" and current then
    succ = succ + 1
    dirty = true
    decide()
  end
elseif op == "failure" then
  if state == "half-open" and current then
    hf = hf + 1
    ha = math.max(ha, tonumber(A.asked))
    dirty = true
    decide()
  end
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
    "hoe", hoe, "hf", hf, "ha", num(ha))
end
-- renewed at every call, changed or not: a breaker in use keeps its state; an idle one's goes away a day
-- after its last call (or after it stops being open)
if iso == "1" then
  redis.call("PERSIST", H)
else
  redis.call("PEXPIRE", H, math.ceil(math.max(0, untilT - now)) + 86400000)
end
local R = {
  granted = granted,
  opened = opened,
  inc = inc,
  epoch = num(epoch),
  state = state,
  openUntil = num(untilT),
  isolated = iso,
  openings = num(openings),
  changedAt = num(at),
  halfOpenUntil = running() > 0 and num(hou) or "0"
}
`

/** The script's source, the same for both editions; each loads it through its own Redis adapter. */
export const fleetScriptSource: string = prologue + body + epilogue
