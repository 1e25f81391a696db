/**
 * What the rate limit algorithms share: the decision they return, in plain milliseconds, and the rounding
 * that makes waiting for `retryAfterMillis` always enough.
 *
 * Decisions round waits *up* to whole milliseconds ({@link ceilMs}), and the allow tests use the same
 * tolerance ({@link EPS}), so that waking up after `retryAfterMillis` always finds the request admissible
 * (no busy loop on a float that is 1e-13 short).
 */

/** One decision: the limiter's `Decision` before it turns milliseconds into `Duration`s. */
export interface Decision {
  readonly allowed: boolean
  /** The capacity (token bucket) or the limit per window. */
  readonly limit: number
  /** Whole units left after the decision. */
  readonly remaining: number
  /** 0 when allowed; otherwise when the same request would pass, in whole milliseconds (`Infinity`: never). */
  readonly retryAfterMillis: number
  /** Time until the key is back to its initial state (bucket full, nothing counted), in whole milliseconds. */
  readonly resetAfterMillis: number
}

/** Float slack in milliseconds: waits shorter than this count as zero. */
export const EPS = 1e-6

/** A wait rounded up to whole milliseconds, treating float noise below `EPS` as zero. */
export const ceilMs = (ms: number): number => ms <= EPS ? 0 : Math.ceil(ms - EPS)

/** Whole units left, robust to `2.9999999999` meaning 3. */
export const whole = (x: number): number => x <= 0 ? 0 : Math.floor(x + 1e-9)

export const decision = (
  allowed: boolean,
  limit: number,
  remaining: number,
  retryAfterMillis: number,
  resetAfterMillis: number
): Decision => ({ allowed, limit, remaining, retryAfterMillis, resetAfterMillis })
