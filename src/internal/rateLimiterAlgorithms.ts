/**
 * The three rate-limit algorithms as pure state transitions over plain numbers, shared by every
 * in-process store. The Redis store runs the same arithmetic in one Lua script per call
 * (`rateLimiterStoreRedis.ts`); keep the two in step.
 *
 * Time is epoch milliseconds from the caller's `Clock`. Decisions round waits *up* to whole
 * milliseconds (`ceilMs`), and the allow test uses the same tolerance, so that waking up after
 * `retryAfter` always finds the request admissible (no busy loop on a float that is 1e-13 short).
 */
import type { StoreDecision, TokenBucketParams, WindowParams } from "../RateLimiterStore.js"

/** Float slack in milliseconds: waits shorter than this count as zero. */
export const EPS = 1e-6

/** A wait rounded up to whole milliseconds, treating float noise below `EPS` as zero. */
export const ceilMs = (ms: number): number => ms <= EPS ? 0 : Math.ceil(ms - EPS)

/** Whole units left, robust to `2.9999999999` meaning 3. */
const whole = (x: number): number => x <= 0 ? 0 : Math.floor(x + 1e-9)

/** The mutable per-key state; which fields mean what depends on the algorithm. */
export interface State {
  /** token bucket: the instant the bucket is full again; windows: the current window's start. */
  a: number
  /** windows: requests counted in the current window. */
  b: number
  /** sliding window: requests counted in the previous window. */
  c: number
  /** The instant after which this state is indistinguishable from a fresh key (safe to forget). */
  expiresAt: number
}

const decision = (
  allowed: boolean,
  limit: number,
  remaining: number,
  retryAfterMillis: number,
  resetAfterMillis: number
): StoreDecision => ({ allowed, limit, remaining, retryAfterMillis, resetAfterMillis })

/**
 * Token bucket in GCRA form: the whole state is `fullAt`, the instant the bucket is full again.
 * With `interval = 1000 / refillPerSecond` ms per token and `tau = capacity * interval`,
 * tokens(now) = capacity - max(0, fullAt - now) / interval. Taking `cost` tokens moves `fullAt` to
 * `max(fullAt, now) + cost * interval`, allowed when that is at most `tau` ahead of now.
 * A fresh key is a state with `a = -Infinity` (a full bucket). Mutates `s` when allowed.
 */
export const tokenBucket = (s: State, cost: number, params: TokenBucketParams, now: number): StoreDecision => {
  const capacity = params.capacity
  const interval = 1000 / params.refillPerSecond
  const tau = capacity * interval
  const t = s.a < now ? now : s.a
  if (cost > capacity) {
    return decision(false, capacity, whole((tau - (t - now)) / interval), Infinity, ceilMs(t - now))
  }
  const next = t + cost * interval
  const wait = next - now - tau
  if (wait <= EPS) {
    s.a = next
    s.expiresAt = next
    return decision(true, capacity, whole((tau - (next - now)) / interval), 0, ceilMs(next - now))
  }
  return decision(false, capacity, whole((tau - (t - now)) / interval), ceilMs(wait), ceilMs(t - now))
}

/** The window start a state should have at `now`; a clock that stepped back keeps the later window. */
const windowStart = (s: State, windowMillis: number, now: number): number => {
  const start = Math.floor(now / windowMillis) * windowMillis
  return s.a > start ? s.a : start
}

/**
 * Fixed window aligned to multiples of the window since the epoch: at most `limit` per window.
 * A fresh key is a state with `a = -Infinity`; `s` is normalised and mutated.
 */
export const fixedWindow = (s: State, cost: number, params: WindowParams, now: number): StoreDecision => {
  const limit = params.limit
  const w = params.windowMillis
  const start = windowStart(s, w, now)
  if (start !== s.a) {
    s.a = start
    s.b = 0
    s.expiresAt = start + w
  }
  const end = ceilMs(start + w - now)
  if (s.b + cost <= limit) {
    s.b += cost
    return decision(true, limit, limit - s.b, 0, end)
  }
  return decision(false, limit, limit - s.b, cost > limit ? Infinity : end, end)
}

/**
 * Sliding window as a weighted two-window counter (Cloudflare's): the estimate at `now` is
 * `previous * (1 - elapsed / window) + current`, where `elapsed` is the time into the current aligned
 * window. Allowed when `estimate + cost <= limit`. `s` is normalised and mutated.
 */
export const slidingWindow = (s: State, cost: number, params: WindowParams, now: number): StoreDecision => {
  const limit = params.limit
  const w = params.windowMillis
  const start = windowStart(s, w, now)
  if (start !== s.a) {
    // consecutive windows by index: with a window that is not whole milliseconds, `start - s.a` is not `w`
    s.c = Math.round(start / w) - Math.round(s.a / w) === 1 ? s.b : 0
    s.b = 0
    s.a = start
    s.expiresAt = start + 2 * w
  }
  const prev = s.c
  let cur = s.b
  // the earliest instant at which `cost` fits, solved from the estimate; allowed when it is now
  let wait: number
  if (cost > limit) {
    wait = Infinity
  } else if (cur + cost <= limit) {
    wait = prev === 0 ? 0 : start + w * (1 - (limit - cur - cost) / prev) - now
  } else {
    // not in this window: in the next one `cur` becomes the previous window's count
    wait = start + w + w * (1 - (limit - cost) / cur) - now
  }
  const allowed = wait <= EPS
  if (allowed) s.b = cur = cur + cost
  const elapsed = now - start
  const estimate = prev * (elapsed >= w ? 0 : 1 - (elapsed < 0 ? 0 : elapsed) / w) + cur
  const reset = cur > 0 ? start + 2 * w - now : prev > 0 ? start + w - now : 0
  return decision(allowed, limit, whole(limit - estimate), allowed ? 0 : ceilMs(wait), ceilMs(reset))
}
