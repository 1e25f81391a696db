/**
 * Keyed rate limiters — token bucket, fixed window, sliding window — behind one interface. The
 * counters live in a {@link RateLimiterStore.RateLimiterStore}: memory for one process, a shared
 * store for many. Provide the store with a layer, e.g. `RateLimiterStore.layerMemory`.
 *
 * @since 0.1.0
 */
import type { Cause, Duration, Effect, Metric } from "effect"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/rateLimiter.js"
import type * as RateLimiterStore from "./RateLimiterStore.js"

/**
 * What a limiter decided for one request.
 *
 * - `limit`: the capacity (token bucket) or the limit per window;
 * - `remaining`: whole units left after the decision;
 * - `retryAfter`: zero when allowed; otherwise the wait after which the same request would pass (if
 *   nobody else takes the units first), rounded up to whole milliseconds;
 * - `resetAfter`: the time until the key is back to its initial state — the bucket full, or nothing
 *   counted in any window that still matters;
 * - `outage`: present (`true`) only when the store could not be asked (e.g. Redis unreachable) and the decision
 *   is its outage policy (`onError`), not a count: `remaining` and `resetAfter` then say nothing about the
 *   quota, and a denial's `retryAfter` is the store's `retryAfterOnError`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  readonly retryAfter: Duration.Duration
  readonly resetAfter: Duration.Duration
  readonly outage?: true
}

/**
 * @since 0.1.0
 * @category models
 */
export type Algorithm = "token-bucket" | "fixed-window" | "sliding-window"

/**
 * @since 0.1.0
 * @category models
 */
export interface AcquireOptions {
  /** Give up with {@link RateLimited} rather than wait longer than this in all. Default: the limiter's `maxWait`. */
  readonly maxWait?: Duration.DurationInput
}

/**
 * A keyed rate limiter.
 *
 * `cost` must be an integer from 1 to `limit`: anything else can never be admitted, so it is a
 * defect (the effect dies with `IllegalArgumentException`) rather than a denial or an endless wait.
 * Validate user-supplied costs against `limit` before calling.
 *
 * @since 0.1.0
 * @category models
 */
export interface RateLimiter {
  readonly algorithm: Algorithm
  /** Identifies the limiter's counters in the store; see the constructors' `name` option. */
  readonly name: string
  /** The capacity (token bucket) or the limit per window: the largest admissible `cost`. */
  readonly limit: number
  /**
   * The period in which `limit` units are granted: the window, or for a token bucket the time to refill
   * from empty (`capacity / refillPerSecond`). Used for `RateLimit-Policy`'s `w`.
   */
  readonly window: Duration.Duration
  /** Decides at once and takes `cost` units (default 1) from `key` when allowed. Never fails. */
  tryAcquire(key: string, cost?: number): Effect.Effect<Decision>
  /**
   * Waits on `Clock` until `cost` units (default 1) can be taken from `key`, then takes them and
   * returns the allowing decision. Before each wait it fails with {@link RateLimited} when the wait
   * would end at or after the fiber's deadline (`Deadline.within`) — reason `"deadline"` — or push
   * the total wait past `maxWait` — reason `"max-wait"`. `maxWait: 0` fails at once when denied.
   * Waiters are not queued: under contention a waiter may be overtaken, so bound the wait.
   */
  acquire(key: string, cost?: number, options?: AcquireOptions): Effect.Effect<Decision, RateLimited>
}

/**
 * `acquire` gave up: waiting for the limiter would pass the deadline (`reason: "deadline"`) or the
 * `maxWait` (`reason: "max-wait"`). `decision` is the last denial; `retryAfter` is its wait.
 *
 * `new RateLimited({ … })` takes `Fields<RateLimited>`: the fields that the interface {@link RateLimited} declares,
 * without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const RateLimited: new(args: Fields<RateLimited>) => RateLimited = internal.RateLimited

/**
 * The error's type.
 *
 * @since 0.1.0
 * @category errors
 */
export interface RateLimited extends Cause.YieldableError {
  readonly _tag: "RateLimited"
  /** The key that was limited. */
  readonly key: string
  /** `"deadline"`: the wait would pass the fiber's deadline; `"max-wait"`: it would pass `maxWait`. */
  readonly reason: "deadline" | "max-wait"
  /** The last denial. */
  readonly decision: Decision
  /** The wait of the last denial. */
  readonly retryAfter: Duration.Duration
}

/**
 * Options shared by every algorithm.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommonOptions {
  /**
   * Identifies the counters in the store. Limiters of the same algorithm and name share counters —
   * across processes, with a shared store. Default: derived from the algorithm and its parameters,
   * so identical policies in different processes share counters; set a name to keep two limiters
   * with equal parameters apart.
   */
  readonly name?: string
  /** The default `maxWait` of `acquire`. Default: no limit other than the deadline. */
  readonly maxWait?: Duration.DurationInput
}

/**
 * @since 0.1.0
 * @category models
 */
export interface TokenBucketOptions extends CommonOptions {
  /** The bucket size: the largest burst and the largest cost. An integer >= 1. */
  readonly capacity: number
  /** Tokens added per second, continuously. A finite number > 0 (fractions allowed: `0.5` is one per 2 s). */
  readonly refillPerSecond: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface WindowOptions extends CommonOptions {
  /** Units admitted per window. An integer >= 1. */
  readonly limit: number
  /** The window length, finite and > 0. Windows are aligned to multiples of it since the epoch. */
  readonly window: Duration.DurationInput
}

/**
 * A token bucket: starts full with `capacity` tokens and refills continuously at `refillPerSecond`;
 * a request takes `cost` tokens. Allows bursts up to `capacity`, and `refillPerSecond` on average.
 * `resetAfter` is the time until the bucket is full.
 *
 * Throws `IllegalArgumentException` when `capacity` is not an integer >= 1, `refillPerSecond` is not a
 * finite number > 0, `name` is empty or `maxWait` is not a duration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter, RateLimiterStore } from "effect-resilience"
 *
 * declare const callPartner: Effect.Effect<string>
 *
 * const program = Effect.gen(function*() {
 *   // bursts of 20, 5 per second sustained, per customer
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 5 })
 *   const decision = yield* limiter.tryAcquire("customer-7")
 *   return decision.allowed ? yield* callPartner : "slow down"
 * }).pipe(Effect.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const tokenBucket: (
  options: TokenBucketOptions
) => Effect.Effect<RateLimiter, never, RateLimiterStore.RateLimiterStore> = internal.tokenBucket

/**
 * A fixed window: at most `limit` units per window, windows aligned to multiples of `window` since
 * the epoch (a one-minute window resets on the minute). Cheapest in state, but a client can spend
 * `limit` at the end of one window and `limit` again at the start of the next. A denied decision's
 * `retryAfter` and every `resetAfter` is the time until the window ends.
 *
 * Throws `IllegalArgumentException` when `limit` is not an integer >= 1 or `window` is not a finite
 * duration > 0.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter, RateLimiterStore } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.fixedWindow({ limit: 100, window: "1 minute" })
 *   // waits for the next window if needed, but at most two seconds
 *   return yield* limiter.acquire("api-key-1", 1, { maxWait: "2 seconds" })
 * }).pipe(Effect.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fixedWindow: (
  options: WindowOptions
) => Effect.Effect<RateLimiter, never, RateLimiterStore.RateLimiterStore> = internal.fixedWindow

/**
 * A sliding window as a weighted two-window counter: the count at `now` is estimated as
 * `previous window * (1 - elapsed / window) + current window`, where `elapsed` is the time into the
 * current aligned window; a request passes when `estimate + cost <= limit`. Two counters per key, no
 * boundary burst of 2 × limit at a window edge for evenly spread traffic. It is an estimate: any
 * aligned window still admits at most `limit`, and any interval of one window length at most
 * `limit + previous × elapsed / window` (< 2 × limit, reached only when the previous window's requests
 * all came at its very end). `retryAfter` solves the estimate for the earliest passing instant.
 *
 * Throws `IllegalArgumentException` as {@link fixedWindow}.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter, RateLimiterStore } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.slidingWindow({ limit: 10, window: "1 second" })
 *   const { allowed, retryAfter } = yield* limiter.tryAcquire("10.0.0.7")
 *   return allowed ? "ok" : `429, retry after ${retryAfter}`
 * }).pipe(Effect.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const slidingWindow: (
  options: WindowOptions
) => Effect.Effect<RateLimiter, never, RateLimiterStore.RateLimiterStore> = internal.slidingWindow

/**
 * Counts allowed decisions, tagged `algorithm` and `limiter` (the name).
 *
 * @since 0.1.0
 * @category metrics
 */
export const allowedTotal: Metric.Metric.Counter<number> = internal.allowedTotal

/**
 * Counts denied decisions, tagged `algorithm` and `limiter` (the name).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deniedTotal: Metric.Metric.Counter<number> = internal.deniedTotal
