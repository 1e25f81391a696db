/**
 * A concurrency limit that finds itself. Like a {@link Bulkhead}, it runs at most `limit` calls at once and
 * queues or refuses the rest; unlike one, the limit moves: it grows while calls come back as fast as when the
 * dependency was idle, and shrinks when they slow down or time out. The algorithms are the ones Netflix's
 * concurrency-limits made known: AIMD (simple, reacts to timeouts only), Vegas and Gradient2 (react to latency
 * before anything times out).
 *
 * @since 1.0.0
 */
import type * as core from "@effect-resilience/core/adaptiveLimit"
import type { Cause, Context, Duration, Effect, Layer, Metric, Scope } from "effect"
import * as internal from "./internal/adaptiveLimiter.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * How the limit moves; build one with {@link aimd}, {@link vegas} or {@link gradient2}.
 *
 * @since 1.0.0
 * @category models
 */
export type Algorithm = core.Algorithm

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /** Default: {@link gradient2} with its defaults. */
  readonly algorithm?: Algorithm
  /** The limit never goes below this; an integer >= 1. Default 1. */
  readonly minLimit?: number
  /** The limit never goes above this; an integer >= `minLimit`. Default 1,000. */
  readonly maxLimit?: number
  /** The limit to start from, between the two. Default 20 (or `maxLimit` when smaller). */
  readonly initialLimit?: number
  /** Calls that may wait for a slot; an integer >= 0. Default 0: refuse as soon as every slot is taken. */
  readonly maxQueue?: number
  /** How long a call may wait in the queue before it fails with reason `"queue-timeout"`. Default: no limit. */
  readonly queueTimeout?: Duration.Input
  /**
   * Keeps part of the limit for more critical work (see `Criticality`): a `default` call is refused with reason
   * `"shed"` once `limit × shares.default` calls are in flight, a `sheddable` one once `limit × shares.sheddable`
   * are; `critical` calls may use the whole limit (and queue). Each share in (0, 1]; when given, missing ones
   * default to `default: 0.9`, `sheddable: 0.7`. Default: no shares, every call may use the whole limit.
   */
  readonly shares?: { readonly default?: number; readonly sheddable?: number }
  /** Labels the metrics (`limiter`) and the errors. */
  readonly name?: string
  /**
   * Which failures tell the algorithm that the dependency is overloaded. Default: a timeout — `AttemptTimeout`,
   * `DeadlineExceeded` or Effect's `TimeoutError`. Other failures and interruptions are not counted at all:
   * a fast error says nothing about capacity.
   */
  readonly isOverload?: (cause: Cause.Cause<unknown>) => boolean
}

/**
 * The limiter refused the call without running it: every slot was taken and the queue was full
 * (`"queue-full"`), the call waited longer than `queueTimeout` (`"queue-timeout"`), the limiter's scope
 * closed (`"closed"`), or, with `shares`, the call's criticality had used up its share of the limit (`"shed"`).
 *
 * `new LimitExceeded({ … })` takes `Fields<LimitExceeded>`: the fields that the interface {@link LimitExceeded}
 * declares, without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const LimitExceeded: new(args: Fields<LimitExceeded>) => LimitExceeded = internal.LimitExceeded

/**
 * The error's type.
 *
 * @since 1.0.0
 * @category errors
 */
export interface LimitExceeded extends Cause.YieldableError {
  readonly _tag: "LimitExceeded"
  /** Why the call was refused. */
  readonly reason: "queue-full" | "queue-timeout" | "closed" | "shed"
  /** The limiter's `name` option, when it has one (`Error`'s own `name` stays `"LimitExceeded"`). */
  readonly limiter: string | undefined
  /** The limit in force when the call was refused. */
  readonly limit: number
  /** How many calls may wait for a slot. */
  readonly maxQueue: number
}

/**
 * @since 1.0.0
 * @category models
 */
export interface Stats {
  readonly limit: number
  /** Calls holding a slot now. */
  readonly inflight: number
  /** Calls waiting for one. */
  readonly queued: number
}

/**
 * @since 1.0.0
 * @category models
 */
export interface AdaptiveLimiter {
  /**
   * Runs `self` in a slot (at once, after the callers queued before it, or not at all with
   * {@link LimitExceeded}), times it on the `Clock`, and feeds the result to the algorithm.
   */
  readonly protect: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LimitExceeded, R>
  /** The limit in force now. */
  readonly limit: Effect.Effect<number>
  readonly stats: Effect.Effect<Stats>
}

/**
 * Additive increase, multiplicative decrease: one more slot per call that completes while at least half the
 * slots are in use, `× backoffRatio` (default 0.9) on an overload or a call slower than `timeout` (default 5 s).
 * It does not look at latency below `timeout`.
 *
 * @since 1.0.0
 * @category algorithms
 */
export const aimd: (options?: {
  readonly backoffRatio?: number
  readonly timeout?: Duration.Input
}) => Algorithm = internal.aimd

/**
 * TCP Vegas: estimates how many calls queue at the dependency from the ratio of the lowest RTT seen to the
 * current one; grows fast while that queue is small, shrinks when it passes a threshold or on an overload. The lowest
 * RTT is measured again every `probeMultiplier × limit` calls (with jitter from `Random`).
 *
 * `alpha` and `beta` (default 3 and 6) bound the queue it aims for, in calls per `log10(limit)` (at least
 * one): below `alpha` queued calls the limit grows, above `beta` it shrinks. Smaller values keep latency
 * closer to the unloaded one at the cost of some throughput; a server shedding load in front of its own
 * resource may want 1 and 2.
 *
 * @since 1.0.0
 * @category algorithms
 */
export const vegas: (options?: {
  readonly smoothing?: number
  readonly probeMultiplier?: number
  readonly alpha?: number
  readonly beta?: number
}) => Algorithm = internal.vegas

/**
 * Gradient2: scales the limit by `rttTolerance × long-term RTT / last RTT` (kept within [0.5, 1]) and adds
 * `queueSize` so it keeps probing upward; an overload counts as the lowest ratio, 0.5. `smoothing` (default 0.2)
 * is how much of each change is applied, so one overload takes about a tenth off the limit. The default
 * algorithm.
 *
 * @since 1.0.0
 * @category algorithms
 */
export const gradient2: (options?: {
  readonly smoothing?: number
  readonly rttTolerance?: number
  readonly longWindow?: number
  readonly queueSize?: number
}) => Algorithm = internal.gradient2

/**
 * Builds a limiter that lives as long as the scope; when the scope closes, waiting calls and later ones fail
 * with reason `"closed"` and running ones finish. Throws `IllegalArgumentError` for options that could never
 * work (bounds out of order, a negative queue).
 *
 * Metrics: gauges `effect_resilience_adaptive_limiter_limit`, `…_inflight` and `…_queued`, counter
 * `effect_resilience_adaptive_limiter_drops_total` (calls the limiter refused, attribute `reason`), histogram
 * `effect_resilience_adaptive_limiter_queue_wait_seconds` (calls that queued), all with
 * attribute `limiter` = `name` when given, in the `Metric.MetricRegistry` of the context `make` ran in. Gauges add up
 * over limiters with the same attributes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { AdaptiveLimiter } from "effect-resilience"
 *
 * declare const queryInventory: (sku: string) => Effect.Effect<number>
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* AdaptiveLimiter.make({
 *     algorithm: AdaptiveLimiter.gradient2(),
 *     minLimit: 2,
 *     maxLimit: 200,
 *     maxQueue: 50,
 *     queueTimeout: "1 second"
 *   })
 *   return yield* limiter.protect(queryInventory("sku-1")).pipe(
 *     Effect.catchTag("LimitExceeded", () => Effect.succeed(0))
 *   )
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (options: Options) => Effect.Effect<AdaptiveLimiter, never, Scope.Scope> = internal.make

/**
 * A layer that builds a limiter for a tag of your choosing, one per dependency. Provide it once, where the
 * program is built: a limiter built per call learns nothing.
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: <I>(tag: Context.Key<I, AdaptiveLimiter>, options: Options) => Layer.Layer<I> = internal.layer

/**
 * The limit each limiter has found, with attribute `limiter`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const limitGauge: Metric.Gauge<number> = internal.limitGauge

/**
 * Calls holding a slot, with attribute `limiter`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const inflightGauge: Metric.Gauge<number> = internal.inflightGauge

/**
 * Calls waiting for a slot, with attribute `limiter`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const queuedGauge: Metric.Gauge<number> = internal.queuedGauge

/**
 * Calls the limiter dropped (refused with {@link LimitExceeded}), with attributes `limiter` and `reason`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const dropsTotal: Metric.Counter<number> = internal.dropsTotal
