/**
 * Hedged requests ("The Tail at Scale", gRPC hedging): when a call is slower than usual, send another
 * copy of it and take whichever answers first. Hedging trades extra load for a shorter tail latency.
 *
 * **Only hedge idempotent work.** Every copy may run to completion on the server side (interrupting a
 * copy only stops waiting for it), so a hedged `POST /payments` can charge twice. Hedge reads, and
 * writes that carry an idempotency key.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Metric } from "effect"
import * as internal from "./internal/hedge.js"
import type { Budget } from "./RetryBudget.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /**
   * How long a copy may run before the next one starts, e.g. the p95 latency of the call. A
   * non-negative duration; `0` starts every copy at once.
   */
  readonly delay: Duration.Input
  /** Copies in all, counting the first: `3` means at most two hedges. An integer >= 1; `1` disables hedging. */
  readonly maxAttempts: number
  /**
   * The retry budget hedges draw from (gRPC A6: hedges and retries share one throttle). Default: the
   * `RetryBudget` in the context, if any. Each copy after the first costs a token, as a retry does; when the
   * budget refuses, no further copy is sent. A won hedge gives back a success.
   */
  readonly budget?: Budget
}

/**
 * Runs `self`, and if it has not succeeded after `delay`, starts another copy, again every `delay`
 * while none has succeeded, up to `maxAttempts` copies in all.
 *
 * - The first copy to **succeed** wins. The others are interrupted and their finalizers have run
 *   before the result is returned.
 * - A copy that **fails** does not end the hedge: the next copy starts at once instead of waiting out
 *   the rest of the delay (like a non-fatal status in gRPC hedging), and the delay to the copy after
 *   that counts from there. Defects count as failures too.
 * - When every copy has failed, the result is the **last** failure (its full `Cause`).
 * - Interrupting the hedge interrupts every copy.
 * - With a retry budget (the `budget` option, or a `RetryBudget` in the context), each copy after the first
 *   costs a token like a retry, and no further copy is sent once the budget refuses; a won hedge records a
 *   success.
 *
 * Each copy after the first increments the `effect_resilience_hedges_total` counter; the current span
 * is annotated with `hedge.copies` (copies started) and, on success, `hedge.winner` (1 for the first copy), and
 * gets a `Hedge.launched` event per extra copy and a `Hedge.settled` event at the end.
 *
 * Only for idempotent work: see the module documentation.
 *
 * Throws `IllegalArgumentError` when `maxAttempts` is not an integer >= 1 or `delay` is not a
 * non-negative duration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Hedge } from "effect-resilience"
 *
 * declare const getProfile: (id: string) => Effect.Effect<{ readonly name: string }, Error>
 *
 * // a read: safe to send twice. A second copy goes out if the first is slower than 50 ms.
 * const profile = getProfile("u-1").pipe(Hedge.hedge({ delay: "50 millis", maxAttempts: 2 }))
 * ```
 *
 * @since 1.0.0
 * @category combinators
 */
export const hedge: {
  (options: Options): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, options: Options): Effect.Effect<A, E, R>
} = internal.hedge

/**
 * Counts the extra copies `Hedge.hedge` started (`effect_resilience_hedges_total`): every copy after the first.
 *
 * @since 1.0.0
 * @category metrics
 */
export const hedgesTotal: Metric.Counter<number> = internal.hedges
