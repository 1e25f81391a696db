/**
 * The fixed and sliding window rate limits. Windows are aligned to multiples of `windowMillis` since the
 * epoch; a key's state is the start of its current window and the units counted in it (and, for the
 * sliding window, in the window before).
 *
 * The memory store runs these functions; the Redis store runs the same arithmetic in Lua scripts
 * (`internal/rateLimiterStore/redis.ts`), and its tests compare the two.
 */
import { ceilMs, type Decision, decision, EPS, whole } from "./rateLimit.js"

export interface Params {
  /** Units admitted per window. */
  readonly limit: number
  /** The window length in milliseconds. */
  readonly windowMillis: number
}

export interface State {
  /** The start of the current window. */
  readonly start: number
  /** Units counted in the current window. */
  readonly current: number
  /** Units counted in the previous window (sliding window only). */
  readonly previous: number
}

/** The state of a key never seen (or forgotten): nothing counted. */
export const fresh: State = { start: -Infinity, current: 0, previous: 0 }

export interface Step {
  readonly decision: Decision
  /** The new state (moved to the window of `now` even when denied). */
  readonly state: State
  /** From this instant on, the key counts nothing in any window that matters: a store may forget it. */
  readonly expiresAt: number
}

/** The window start at `now`; a clock that stepped back keeps the later window. */
const windowStart = (s: State, windowMillis: number, now: number): number => {
  const start = Math.floor(now / windowMillis) * windowMillis
  return s.start > start ? s.start : start
}

/** At most `limit` units per aligned window. */
export const fixedWindow = (s0: State, cost: number, params: Params, now: number): Step => {
  const limit = params.limit
  const w = params.windowMillis
  const start = windowStart(s0, w, now)
  const s = start === s0.start ? s0 : { start, current: 0, previous: 0 }
  const end = ceilMs(start + w - now)
  const expiresAt = start + w
  if (s.current + cost <= limit) {
    const current = s.current + cost
    return {
      decision: decision(true, limit, limit - current, 0, end),
      state: { start, current, previous: 0 },
      expiresAt
    }
  }
  return {
    decision: decision(false, limit, limit - s.current, cost > limit ? Infinity : end, end),
    state: s,
    expiresAt
  }
}

/**
 * Sliding window as a weighted two-window counter (Cloudflare's): the estimate at `now` is
 * `previous * (1 - elapsed / window) + current`, where `elapsed` is the time into the current aligned
 * window. Allowed when `estimate + cost <= limit`.
 */
export const slidingWindow = (s0: State, cost: number, params: Params, now: number): Step => {
  const limit = params.limit
  const w = params.windowMillis
  const start = windowStart(s0, w, now)
  // consecutive windows by index: with a window that is not whole milliseconds, `start - s0.start` is not `w`
  const s = start === s0.start ? s0 : {
    start,
    current: 0,
    previous: Math.round(start / w) - Math.round(s0.start / w) === 1 ? s0.current : 0
  }
  const prev = s.previous
  let cur = s.current
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
  if (allowed) cur = cur + cost
  const elapsed = now - start
  const estimate = prev * (elapsed >= w ? 0 : 1 - (elapsed < 0 ? 0 : elapsed) / w) + cur
  const reset = cur > 0 ? start + 2 * w - now : prev > 0 ? start + w - now : 0
  return {
    decision: decision(allowed, limit, whole(limit - estimate), allowed ? 0 : ceilMs(wait), ceilMs(reset)),
    state: allowed ? { start, current: cur, previous: prev } : s,
    expiresAt: start + 2 * w
  }
}
