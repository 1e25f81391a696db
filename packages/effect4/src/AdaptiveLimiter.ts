/**
 * A concurrency limit that finds itself. Like a {@link Bulkhead}, it runs at most `limit` calls at once and
 * queues or refuses the rest; unlike one, the limit moves: it grows while calls come back as fast as when the
 * dependency was idle, and shrinks when they slow down or time out. The algorithms are the ones Netflix's
 * concurrency-limits made known: AIMD (simple, reacts to timeouts only), Vegas and Gradient2 (react to latency
 * before anything times out), each per call or behind a window of calls ({@link windowed}); and the windowed Vegas
 * `LoadShedMiddleware` admits with ({@link windowedVegas}).
 *
 * @since 1.0.0
 */
import type * as core from "@effect-resilience/core/adaptiveLimit"
import type { Cause, Context, Duration, Effect, Layer, Metric, Scope } from "effect"
import * as internal from "./internal/adaptiveLimiter.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * How the limit moves; build one with {@link aimd}, {@link vegas}, {@link gradient2} or {@link windowedVegas}, or
 * put a window in front of one with {@link windowed}.
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
 * TCP Vegas, per call, exactly as Netflix's `VegasLimit`: the lowest RTT seen is the no-load RTT, and each call
 * estimates the calls queued at the dependency as `ceil(limit × (1 − noLoad / rtt))`. With `t = log10(limit)` (at
 * least 1): a queue of at most `t` adds `beta × t`, one below `alpha × t` adds `t`, one above `beta × t` — or an
 * overload — takes `t` off; nothing moves while fewer than half the slots are used. `smoothing` (default 1) is how
 * much of each change is applied. Every `probeMultiplier × limit` calls (default 30, with jitter in [0.5, 1) from
 * `Random`) the next call's RTT is taken as the no-load one, so that a dependency that got slower for good is
 * learnt. A call that took no time on the clock is no sample.
 *
 * `alpha` and `beta` (default 3 and 6) bound the queue it aims for, in calls per `log10(limit)`: below `alpha`
 * queued calls the limit grows, above `beta` it shrinks. Per call, one fast answer (a 400, a cache hit) becomes the
 * no-load RTT until the next probe; Netflix puts a window in front of it (`windowed(vegas())`, see
 * {@link windowed}), and a server shedding load wants {@link windowedVegas}.
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
 * TCP Vegas over windows of calls sized to the traffic, with a re-measure that drains first:
 * `LoadShedMiddleware`'s default (with `alpha: 2, beta: 4`). Not Netflix's: made for a mix of cheap and expensive
 * calls in front of a resource of fixed capacity.
 *
 * It moves once per window of calls (at least 10, and at least the limit; more while their RTTs are spread), not
 * once per call, and the RTT it judges is the window's mean without its fastest and slowest tenth: a steady mix of
 * cheap and expensive calls has a steady mean, and no single call — a cached answer, a 400, an RTT of zero on a
 * coarse clock — can move it. The no-load RTT is the lowest window RTT seen, measured again every
 * `probeMultiplier × limit` calls (default 30, with jitter from `Random`): the limit first drops to where nothing
 * would queue, a window of the calls admitted then is the new no-load RTT, and the limit goes back, so a dependency
 * that got slower for good is learnt without letting the queue grow. While probes keep finding the same no-load RTT,
 * they come up to four times less often. Too much queued, it goes straight to where `beta` would be, at most halving
 * per window. `alpha`, `beta` and `smoothing` mean what they mean for {@link vegas}.
 *
 * @since 1.0.0
 * @category algorithms
 */
export const windowedVegas: (options?: {
  readonly smoothing?: number
  readonly probeMultiplier?: number
  readonly alpha?: number
  readonly beta?: number
}) => Algorithm = internal.windowedVegas

/**
 * Puts a window of calls in front of any algorithm, exactly as Netflix's `WindowedLimit`: the algorithm sees one
 * sample per window — the window's RTT, the most calls in flight during it, and whether any was an overload —
 * instead of one per call.
 *
 * A window closes with the first call that ends after its end, which is the previous window's closing call's end
 * plus twice its lowest RTT, kept within [`minWindowTime`, `maxWindowTime`] (default 1 second and 1 second, each at
 * least 100 ms); the first call closes the first window. A window of fewer than `windowSize` calls (default 10, at
 * least 10) is dropped. Calls faster than `minRttThreshold` (default 100 µs) are ignored. The window's RTT is, by
 * `sample`:
 *
 * - `"average"` (the default): the mean;
 * - `{ percentile }`, in (0, 1): the `round(n × percentile)`-th fastest; such a window holds at most `capacity`
 *   calls (default 1,000) and ignores the rest until it closes, as Netflix's percentile window does;
 * - `{ trimmedMean }`, in [0, 0.5): the mean without that share of the calls at each end.
 *
 * Throws `IllegalArgumentError` for a window that could never work, or around another `windowed`.
 *
 * @example
 * ```ts
 * import { AdaptiveLimiter } from "effect-resilience"
 *
 * // Netflix's windowed Vegas, judging the 90th percentile of each window of calls
 * const algorithm = AdaptiveLimiter.windowed(AdaptiveLimiter.vegas(), { sample: { percentile: 0.9 } })
 * ```
 *
 * @since 1.0.0
 * @category algorithms
 */
export const windowed: (algorithm: Algorithm, options?: {
  readonly minWindowTime?: Duration.Input
  readonly maxWindowTime?: Duration.Input
  readonly windowSize?: number
  readonly minRttThreshold?: Duration.Input
  readonly sample?: "average" | { readonly percentile: number; readonly capacity?: number } | {
    readonly trimmedMean: number
  }
}) => Algorithm = internal.windowed

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
