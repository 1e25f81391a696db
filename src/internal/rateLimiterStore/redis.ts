/**
 * The Redis rate-limit store: each algorithm is one Lua script, one `EVALSHA` per decision, running
 * the arithmetic of `core/tokenBucket.ts` and `core/rateWindows.ts` line for line (Lua numbers are the same IEEE doubles,
 * and states are stored with `%.17g`, so no precision is lost between calls). Keep the two in step.
 *
 * Key: `<prefix><tb|fw|sw>:{<name>:<key>}` (parts escaped): one string key per limiter and key, its
 * Cluster hash tag the limiter name and key. Value: token bucket `fullAt`; fixed window
 * `start:count`; sliding window `start:current:previous`.
 *
 * Time is the `nowMillis` the limiter passes (the caller's `Clock`), as in the memory store. A key is
 * written only when a request is admitted (a denial changes nothing, as in memory), with a
 * `PX` of its natural ttl — the time until it is indistinguishable from a fresh key — plus
 * `expiryMargin`, so an idle key goes away on its own and a process whose clock is a little behind
 * still finds it.
 */
import { Effect, Layer } from "effect"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../../RateLimiterStore.js"
import * as redis from "../redis/client.js"
import {
  checkConnection,
  escapePart,
  type RateLimiterOptions,
  type ResolvedRateLimiter,
  resolveRateLimiter
} from "../redis/options.js"
import { RateLimiterStore } from "./service.js"

export type Options = redis.ClientOptions & RateLimiterOptions

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
export const tokenBucketScript = redis.script(`${prelude}
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
`)

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
const fixedWindowScript = redis.script(`${prelude}${windowState}
if start ~= a then b = 0 end
local reset = ceilms(start + w - now)
if b + cost <= limit then
  b = b + cost
  redis.call("SET", KEYS[1], num(start) .. ":" .. b, "PX", math.ceil(start + w - now + margin))
  return {1, limit - b, 0, reset}
end
if cost > limit then return {0, limit - b, -1, reset} end
return {0, limit - b, reset, reset}
`)

/** ARGV now, cost, limit, windowMillis, margin. */
const slidingWindowScript = redis.script(`${prelude}${windowState}
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
`)

export const keyOf = (prefix: string, algorithm: "tb" | "fw" | "sw", name: string, key: string): string =>
  `${prefix}${algorithm}:{${escapePart(name)}:${escapePart(key)}}`

const decode = (limit: number, reply: unknown): StoreDecision => {
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

/** How often at most an outage is logged: every failing decision would flood the log. */
const WARN_EVERY_MILLIS = 10_000

export const make = (
  client: redis.Client,
  options: ResolvedRateLimiter
): Store => {
  const margin = redis.millisArg(options.marginMillis)
  let lastWarning = -Infinity
  let suppressed = 0

  const fallback = (limit: number, nowMillis: number, cause: unknown): Effect.Effect<StoreDecision> => {
    const decision: StoreDecision = options.onError === "allow"
      ? { allowed: true, limit, remaining: 0, retryAfterMillis: 0, resetAfterMillis: 0, outage: true }
      : {
        allowed: false,
        limit,
        remaining: 0,
        retryAfterMillis: options.retryAfterOnErrorMillis,
        resetAfterMillis: options.retryAfterOnErrorMillis,
        outage: true
      }
    if (nowMillis - lastWarning < WARN_EVERY_MILLIS) {
      suppressed++
      return Effect.succeed(decision)
    }
    const skipped = suppressed
    lastWarning = nowMillis
    suppressed = 0
    return Effect.as(
      Effect.logWarning(
        `RateLimiterStore (redis): Redis failed, ${options.onError === "allow" ? "allowing" : "denying"} requests`,
        cause
      ).pipe(Effect.annotateLogs({ onError: options.onError, suppressedWarnings: skipped })),
      decision
    )
  }

  /**
   * What one limiter sends the same on every call, worked out on its first: the key up to the caller's key,
   * and its limit and rate or window as script arguments. Keyed by the limiter's params object (one per
   * limiter, kept as long as the limiter).
   */
  interface Fixed {
    readonly script: redis.Script
    readonly name: string
    readonly limit: number
    readonly per: number
    /** The key without the caller's key and the closing brace of the hash tag. */
    readonly keyHead: string
    readonly limitArg: string
    readonly perArg: string
  }
  const fixed = new WeakMap<TokenBucketParams | WindowParams, Fixed>()
  const fixedOf = (
    params: TokenBucketParams | WindowParams,
    script: redis.Script,
    kind: "tb" | "fw" | "sw",
    limit: number,
    per: number
  ): Fixed => {
    const f = fixed.get(params)
    // a params object reused for other limits (possible through the public Store) is worked out again
    if (f !== undefined && f.script === script && f.name === params.name && f.limit === limit && f.per === per) {
      return f
    }
    const made: Fixed = {
      script,
      name: params.name,
      limit,
      per,
      keyHead: keyOf(options.prefix, kind, params.name, "").slice(0, -1),
      limitArg: String(limit),
      perArg: String(per)
    }
    fixed.set(params, made)
    return made
  }

  // every script takes ARGV now, cost, its limit, its rate or window, and the expiry margin
  const run = (f: Fixed, key: string, cost: number, nowMillis: number): Effect.Effect<StoreDecision> =>
    // an error answers with the fallback decision in the same step (no catchAll frame per call)
    redis.runScriptOr(
      client,
      f.script,
      [`${f.keyHead}${escapePart(key)}}`],
      [String(nowMillis), cost === 1 ? "1" : String(cost), f.limitArg, f.perArg, margin],
      false,
      options.timeoutMillis,
      (reply) => decode(f.limit, reply),
      (cause) => fallback(f.limit, nowMillis, cause)
    )

  return {
    tokenBucket: (key: string, cost: number, params: TokenBucketParams, nowMillis: number) =>
      run(
        fixedOf(params, tokenBucketScript, "tb", params.capacity, params.refillPerSecond),
        key,
        cost,
        nowMillis
      ),
    fixedWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
      run(fixedOf(params, fixedWindowScript, "fw", params.limit, params.windowMillis), key, cost, nowMillis),
    slidingWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
      run(fixedOf(params, slidingWindowScript, "sw", params.limit, params.windowMillis), key, cost, nowMillis)
  }
}

export const layer = (options: Options): Layer.Layer<RateLimiterStore> => {
  checkConnection("RateLimiterStore/Redis", options)
  const resolved = resolveRateLimiter(options)
  return Layer.scoped(
    RateLimiterStore,
    Effect.map(redis.acquire(options), (client) => make(client, resolved))
  )
}
