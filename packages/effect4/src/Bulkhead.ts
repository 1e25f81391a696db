/**
 * A bulkhead caps how many calls to a dependency run at once, so one slow dependency cannot take every
 * fiber, connection or socket of the process with it. Calls beyond the cap wait in a bounded
 * first-in-first-out queue; calls beyond the queue fail at once with {@link BulkheadFull}, which is the
 * load-shedding signal.
 *
 * @since 1.0.0
 */
import type { Cause, Context, Duration, Effect, Layer, Metric, Scope } from "effect"
import * as internal from "./internal/bulkhead.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * Why a call was turned away:
 * - `"queue-full"`: `maxConcurrent` calls were running and `maxQueue` were already waiting;
 * - `"queue-timeout"`: the call waited longer than `queueTimeout` for a slot;
 * - `"closed"`: the scope of the bulkhead closed (while the call waited, or before it arrived).
 *
 * @since 1.0.0
 * @category models
 */
export type RejectionReason = "queue-full" | "queue-timeout" | "closed"

/**
 * The bulkhead turned the call away without running it (see {@link RejectionReason}).
 *
 * `new BulkheadFull({ … })` takes `Fields<BulkheadFull>`: the fields that the interface {@link BulkheadFull}
 * declares, without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const BulkheadFull: new(args: Fields<BulkheadFull>) => BulkheadFull = internal.BulkheadFull

/**
 * The error's type.
 *
 * @since 1.0.0
 * @category errors
 */
export interface BulkheadFull extends Cause.YieldableError {
  readonly _tag: "BulkheadFull"
  /** Why the call was turned away. */
  readonly reason: RejectionReason
  /** The bulkhead's `name` option, when it has one (`Error`'s own `name` stays `"BulkheadFull"`). */
  readonly bulkhead: string | undefined
  /** How many calls the bulkhead runs at once. */
  readonly maxConcurrent: number
  /** How many calls may wait for a slot. */
  readonly maxQueue: number
}

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /** Calls running at once; an integer >= 1. */
  readonly maxConcurrent: number
  /** Calls waiting for a slot; an integer >= 0 (`0`: no queue, reject as soon as every slot is taken). */
  readonly maxQueue: number
  /**
   * How long a call may wait in the queue; past it, it fails with `BulkheadFull` and reason
   * `"queue-timeout"`. Default: no limit.
   */
  readonly queueTimeout?: Duration.Input
  /** Tags the bulkhead's metrics (`bulkhead` attribute) and errors. */
  readonly name?: string
}

/**
 * A snapshot of a bulkhead.
 *
 * @since 1.0.0
 * @category models
 */
export interface Stats {
  /** Calls holding a slot now. */
  readonly active: number
  /** Calls waiting for a slot now. */
  readonly queued: number
}

/**
 * @since 1.0.0
 * @category models
 */
export interface Bulkhead {
  readonly maxConcurrent: number
  readonly maxQueue: number
  /**
   * Runs `self` in a slot: at once when one is free, after the callers queued before it otherwise, or
   * fails with {@link BulkheadFull} without running it. The slot is given back however `self` ends
   * (success, failure, defect, interruption); an interrupted waiter gives its queue place back.
   */
  readonly protect: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | BulkheadFull, R>
  /** Calls running and waiting now. */
  readonly stats: Effect.Effect<Stats>
}

/**
 * Builds a bulkhead that lives as long as the scope. When the scope closes, waiting callers fail with
 * `BulkheadFull` (reason `"closed"`) and so do later calls; calls already running finish normally.
 *
 * Metrics: gauges `effect_resilience_bulkhead_active` and `effect_resilience_bulkhead_queued`, counter
 * `effect_resilience_bulkhead_rejections_total` (attribute `reason`), histogram
 * `effect_resilience_bulkhead_queue_wait_seconds` (calls that queued), all with attribute `bulkhead` = `name`
 * when a name is given, in the `Metric.MetricRegistry` of the context `make` runs in (so the gauges' moves of one
 * bulkhead always add up in one registry, whichever fiber calls `protect`). A call that had to queue annotates the current span with
 * `bulkhead.queued_ms`; a rejected one with `bulkhead.rejected`; both are events too (`Bulkhead.queued`,
 * `Bulkhead.rejected`).
 *
 * Throws `IllegalArgumentError` when `maxConcurrent` is not an integer >= 1, `maxQueue` not an
 * integer >= 0, or `queueTimeout` not a non-negative duration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Bulkhead } from "effect-resilience"
 *
 * declare const queryInventory: (sku: string) => Effect.Effect<number>
 *
 * const program = Effect.gen(function*() {
 *   const bulkhead = yield* Bulkhead.make({ maxConcurrent: 10, maxQueue: 50, queueTimeout: "2 seconds" })
 *   const stock = yield* bulkhead.protect(queryInventory("sku-1")).pipe(
 *     Effect.catchTag("BulkheadFull", () => Effect.succeed(0))
 *   )
 *   return stock
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (options: Options) => Effect.Effect<Bulkhead, never, Scope.Scope> = internal.make

/**
 * A layer that builds a bulkhead for a tag of your choosing, for one bulkhead per dependency.
 *
 * @example
 * ```ts
 * import { Context, Effect } from "effect"
 * import { Bulkhead } from "effect-resilience"
 *
 * class PaymentsBulkhead extends Context.Service<PaymentsBulkhead, Bulkhead.Bulkhead>()("PaymentsBulkhead") {}
 *
 * declare const charge: Effect.Effect<string>
 *
 * const program = Effect.gen(function*() {
 *   const bulkhead = yield* PaymentsBulkhead
 *   return yield* bulkhead.protect(charge)
 * }).pipe(Effect.provide(Bulkhead.layer(PaymentsBulkhead, { maxConcurrent: 4, maxQueue: 16, name: "payments" })))
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: <I>(tag: Context.Key<I, Bulkhead>, options: Options) => Layer.Layer<I> = internal.layer

/**
 * Calls holding a slot (`effect_resilience_bulkhead_active`), tagged `bulkhead` when the bulkhead has a name.
 * Bulkheads with the same name add up.
 *
 * @since 1.0.0
 * @category metrics
 */
export const activeGauge: Metric.Gauge<number> = internal.activeGauge

/**
 * Calls waiting for a slot (`effect_resilience_bulkhead_queued`), tagged `bulkhead` when the bulkhead has a name.
 *
 * @since 1.0.0
 * @category metrics
 */
export const queuedGauge: Metric.Gauge<number> = internal.queuedGauge

/**
 * Calls turned away (`effect_resilience_bulkhead_rejections_total`), tagged `reason` (a {@link RejectionReason})
 * and `bulkhead` when the bulkhead has a name.
 *
 * @since 1.0.0
 * @category metrics
 */
export const rejectionsTotal: Metric.Counter<number> = internal.rejections
