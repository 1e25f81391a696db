/**
 * The Redis rate-limit store's Lua scripts and the pure parts around them (plain text and functions, shared by both
 * editions; each edition's `internal/rateLimiterStore/redis.ts` loads them through its own Redis adapter). Each
 * algorithm is one script, one `EVALSHA` per decision, running the arithmetic of `core/tokenBucket.ts` and
 * `core/rateWindows.ts` line for line (Lua numbers are the same IEEE doubles, and states are stored with `%.17g`,
 * so no precision is lost between calls). Keep the two in step.
 *
 * Key: `<prefix><tb|fw|sw>:{<name>:<key>}` (parts escaped): one string key per limiter and key, its Cluster hash
 * tag the limiter name and key. Value: token bucket `fullAt`; fixed window `start:count`; sliding window
 * `start:current:previous`.
 *
 * Every script takes ARGV now, cost, its limit (capacity), its rate (refillPerSecond) or window (windowMillis), and
 * the expiry margin, and replies `{allowed, remaining, retryAfter, resetAfter}`, `-1` for an infinite wait. A key
 * is written only when a request is admitted, with a `PX` of its natural ttl plus the margin.
 */
import { escapePart } from "./redisKey.js"

export type Algorithm = "tb" | "fw" | "sw"

/**
 * The helpers of `core/rateLimit.ts`; `-1` stands for an infinite wait (Redis replies are
 * integers). Counts are integers (`..` formats them exactly); window starts go through `num` (`%.17g`).
 */
const prelude = `
local function num(x) return string.format("%.17g", x) end
local EPS = 1e-6
local function ceilms(ms) if ms <= EPS then return 0 end return math.ceil(ms - EPS) end
local function whole(x) if x <= 0 then return 0 end return math.floor(x + 1e-9) end
local function wait(ms) if ms == math.huge then return -1 end return ceilms(ms) end
local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local margin = tonumber(ARGV[5])
`

/** ARGV now, cost, capacity, refillPerSecond, margin. Reply {allowed, remaining, retryAfter, resetAfter}. */
const tokenBucket = `${prelude}
local capacity = tonumber(ARGV[3])
local interval = 1000 / tonumber(ARGV[4])
local tau = capacity * interval
local a = -math.huge
local v = redis.call("GET", KEYS[1])
if v then a = tonumber(v) end
-- spans from now, not instants: at epoch scale now + tau - now may exceed tau (see core/tokenBucket.ts)
local ahead = 0
if a > now then ahead = a - now end
if cost > capacity then
  return {0, whole((tau - ahead) / interval), -1, ceilms(ahead)}
end
local after = ahead + cost * interval
local w = after - tau
if w <= EPS then
  -- numbers passed to redis.call are formatted with %.17g: exact
  redis.call("SET", KEYS[1], now + after, "PX", math.ceil(after + margin))
  return {1, whole((tau - after) / interval), 0, ceilms(after)}
end
return {0, whole((tau - ahead) / interval), ceilms(w), ceilms(ahead)}
`

/** Reads a window state "start:current[:previous]"; a fresh key starts at -inf with nothing counted. */
const windowState = `
local a, b, c = -math.huge, 0, 0
local v = redis.call("GET", KEYS[1])
if v then
  local i = string.find(v, ":", 1, true)
  local j = string.find(v, ":", i + 1, true)
  a = tonumber(string.sub(v, 1, i - 1))
  if j then
    b = tonumber(string.sub(v, i + 1, j - 1))
    c = tonumber(string.sub(v, j + 1))
  else
    b = tonumber(string.sub(v, i + 1))
  end
end
local limit = tonumber(ARGV[3])
local w = tonumber(ARGV[4])
-- the window start at now; a clock that stepped back keeps the later window
local start = math.floor(now / w) * w
if a > start then start = a end
`

/** ARGV now, cost, limit, windowMillis, margin. */
const fixedWindow = `${prelude}${windowState}
if start ~= a then b = 0 end
local reset = ceilms(start + w - now)
if b + cost <= limit then
  b = b + cost
  redis.call("SET", KEYS[1], num(start) .. ":" .. b, "PX", math.ceil(start + w - now + margin))
  return {1, limit - b, 0, reset}
end
if cost > limit then return {0, limit - b, -1, reset} end
return {0, limit - b, reset, reset}
`

/** ARGV now, cost, limit, windowMillis, margin. */
const slidingWindow = `${prelude}${windowState}
if start ~= a then
  -- consecutive windows by index: with a window that is not whole milliseconds, start - a is not w
  if math.floor(start / w + 0.5) - math.floor(a / w + 0.5) == 1 then c = b else c = 0 end
  b = 0
  a = start
end
local prev = c
local cur = b
-- the earliest instant at which cost fits, solved from the estimate; allowed when it is now
local wt
if cost > limit then
  wt = math.huge
elseif cur + cost <= limit then
  if prev == 0 then wt = 0 else wt = start + w * (1 - (limit - cur - cost) / prev) - now end
else
  wt = start + w + w * (1 - (limit - cost) / cur) - now
end
local allowed = wt <= EPS
if allowed then
  cur = cur + cost
  redis.call("SET", KEYS[1], num(start) .. ":" .. cur .. ":" .. prev, "PX", math.ceil(start + 2 * w - now + margin))
end
local elapsed = now - start
local f
if elapsed >= w then f = 0 elseif elapsed < 0 then f = 1 else f = 1 - elapsed / w end
local estimate = prev * f + cur
local reset
if cur > 0 then reset = start + 2 * w - now elseif prev > 0 then reset = start + w - now else reset = 0 end
if allowed then return {1, whole(limit - estimate), 0, ceilms(reset)} end
return {0, whole(limit - estimate), wait(wt), ceilms(reset)}
`

/** The Lua source of each algorithm. */
export const scripts: Readonly<Record<Algorithm, string>> = {
  tb: tokenBucket,
  fw: fixedWindow,
  sw: slidingWindow
}

export const keyOf = (prefix: string, algorithm: Algorithm, name: string, key: string): string =>
  `${prefix}${algorithm}:{${escapePart(name)}:${escapePart(key)}}`

/** A script's reply, as the stores' `StoreDecision` (without `outage`). */
export interface ScriptDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  readonly retryAfterMillis: number
  readonly resetAfterMillis: number
}

export const decode = (limit: number, reply: unknown): ScriptDecision => {
  if (!Array.isArray(reply) || reply.length !== 4) throw new Error(`unexpected script reply: ${String(reply)}`)
  const retry = reply[2] as number
  return {
    allowed: reply[0] === 1,
    limit,
    remaining: reply[1] as number,
    retryAfterMillis: retry === -1 ? Infinity : retry,
    resetAfterMillis: reply[3] as number
  }
}

/**
 * What one limiter sends the same on every call, worked out on its first: the key up to the caller's key, and its
 * limit and rate or window as script arguments. `S` is the edition's loaded script.
 */
export interface Fixed<S> {
  readonly script: S
  readonly name: string
  readonly limit: number
  readonly per: number
  /** The key without the caller's key and the closing brace of the hash tag. */
  readonly keyHead: string
  readonly limitArg: string
  readonly perArg: string
}

/**
 * A cache of {@link Fixed}, keyed by the limiter's params object (one per limiter, kept as long as the limiter).
 * A params object reused for other limits (possible through the public Store) is worked out again.
 */
export const fixedCache = <S>(prefix: string) => {
  const cache = new WeakMap<{ readonly name: string }, Fixed<S>>()
  return (params: { readonly name: string }, script: S, kind: Algorithm, limit: number, per: number): Fixed<S> => {
    const f = cache.get(params)
    if (f !== undefined && f.script === script && f.name === params.name && f.limit === limit && f.per === per) {
      return f
    }
    const made: Fixed<S> = {
      script,
      name: params.name,
      limit,
      per,
      keyHead: keyOf(prefix, kind, params.name, "").slice(0, -1),
      limitArg: String(limit),
      perArg: String(per)
    }
    cache.set(params, made)
    return made
  }
}

/** The caller's key under a limiter's {@link Fixed} head. */
export const keyFor = <S>(f: Fixed<S>, key: string): string => `${f.keyHead}${escapePart(key)}}`

/** ARGV of one call. */
export const argsFor = <S>(f: Fixed<S>, cost: number, nowMillis: number, margin: string): Array<string> => [
  String(nowMillis),
  cost === 1 ? "1" : String(cost),
  f.limitArg,
  f.perArg,
  margin
]
