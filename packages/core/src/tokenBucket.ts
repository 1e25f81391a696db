/**
 * The token bucket in GCRA form: the whole state of a key is one number, `fullAt`, the instant its bucket
 * is full again. With `interval = 1000 / refillPerSecond` ms per token and `tau = capacity * interval`,
 * `tokens(now) = capacity - max(0, fullAt - now) / interval`. Taking `cost` tokens moves `fullAt` to
 * `max(fullAt, now) + cost * interval`, allowed when that is at most `tau` ahead of now.
 *
 * The memory store runs this function; the Redis store runs the same arithmetic in a Lua script
 * (`internal/rateLimiterStore/redis.ts`), and its tests compare the two.
 */
import { ceilMs, type Decision, decision, EPS, whole } from "./rateLimit.js"

export interface Params {
  /** The bucket size: the largest burst and the largest cost. */
  readonly capacity: number
  /** Tokens added per second, continuously. */
  readonly refillPerSecond: number
}

/** The state of a key never seen (or forgotten): a full bucket. */
export const fresh = -Infinity

export interface Step {
  readonly decision: Decision
  /** The new `fullAt`: unchanged when denied. */
  readonly state: number
  /** From this instant on, the key is a full bucket again: a store may forget it. */
  readonly expiresAt: number
}

/**
 * Takes `cost` tokens at `now` from a bucket full at `fullAt`, when there are enough.
 *
 * The arithmetic is done on spans from `now` (`ahead`, `after`), not on instants: at epoch scale an
 * instant is a multiple of 2^-12 ms, so `now + tau - now` may exceed `tau` by more than `EPS` — and a full
 * bucket would deny its whole capacity at every instant of a long range, with a `retryAfterMillis` that
 * never helps. Spans from `now` are exact for a full bucket; a stored `fullAt` is off by at most one
 * rounding, which `retryAfterMillis` (rounded up to whole milliseconds) always covers.
 */
export const take = (fullAt: number, cost: number, params: Params, now: number): Step => {
  const capacity = params.capacity
  const interval = 1000 / params.refillPerSecond
  const tau = capacity * interval
  // how long until the bucket is full, before and after taking `cost`
  const ahead = fullAt > now ? fullAt - now : 0
  if (cost > capacity) {
    return deny(fullAt, decision(false, capacity, whole((tau - ahead) / interval), Infinity, ceilMs(ahead)))
  }
  const after = ahead + cost * interval
  const wait = after - tau
  if (wait <= EPS) {
    const next = now + after
    return {
      decision: decision(true, capacity, whole((tau - after) / interval), 0, ceilMs(after)),
      state: next,
      expiresAt: next
    }
  }
  return deny(fullAt, decision(false, capacity, whole((tau - ahead) / interval), ceilMs(wait), ceilMs(ahead)))
}

const deny = (fullAt: number, d: Decision): Step => ({ decision: d, state: fullAt, expiresAt: fullAt })
