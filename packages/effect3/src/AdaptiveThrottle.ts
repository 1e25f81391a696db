/**
 * Client-side adaptive throttling, as described in Google's SRE book. Per key (an origin, say), the throttle
 * counts the calls the client tried and the ones the backend accepted over a sliding window (two minutes by
 * default), and rejects a new call locally, without sending it, with probability
 * `max(0, (requests − k · accepts) / (requests + 1))`.
 *
 * While the backend accepts everything the probability is zero and the throttle costs one map lookup. When the
 * backend refuses most calls (it is overloaded, or down), the client keeps sending only about `k` times what
 * gets accepted: enough to notice when it recovers, not enough to keep it down. With many clients, this is
 * what stops a retry storm at the source.
 *
 * @since 0.1.0
 */
import type { Cause, Context, Duration, Effect, Exit, Layer, Metric } from "effect"
import * as internal from "./internal/adaptiveThrottle.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** `k` >= 1: how many times the accepted calls the client may send. Default 2. */
  readonly k?: number
  /** The sliding window over which requests and accepts are counted. Default 2 minutes. */
  readonly window?: Duration.DurationInput
  /** How many buckets the window slides by (an integer >= 1). Default 120 (one second each by default). */
  readonly buckets?: number
  /**
   * The local rejection probability never exceeds this, a number in [0, 1] (failsafe-go's name): below 1,
   * some calls always reach a backend that refuses everything, so the throttle sees it recover. 0 sends
   * every call (the throttle only counts), 1 leaves the SRE formula uncapped. Default 0.9 (see
   * docs/overload.md).
   */
  readonly maxRejectionRate?: number
  /** Keys (origins) tracked at most; the least recently used is forgotten beyond it. Default 10,000. */
  readonly maxKeys?: number
  /**
   * Whether the backend accepted the call: `true` counts an accept, `false` does not, `undefined` says
   * nothing (the call still counted as a request). Default: a success is accepted, a failure is not, an
   * interruption says nothing. A client that can tell an overload refusal (429, 503) from an ordinary error
   * (404) should accept the ordinary errors: the backend did its work.
   */
  readonly isAccepted?: (exit: Exit.Exit<unknown, unknown>) => boolean | undefined
  /** Labels the metric (`throttle`). */
  readonly name?: string
}

/**
 * The call was rejected locally, without being sent: the backend has been refusing most calls for this key.
 * `probability` is the rejection probability the call drew against.
 *
 * `new LocallyRejected({ … })` takes `Fields<LocallyRejected>`: the fields that the interface
 * {@link LocallyRejected} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const LocallyRejected: new(args: Fields<LocallyRejected>) => LocallyRejected = internal.LocallyRejected

/**
 * The error's type.
 *
 * @since 0.1.0
 * @category errors
 */
export interface LocallyRejected extends Cause.YieldableError {
  readonly _tag: "LocallyRejected"
  /** The key whose backend has been refusing calls. */
  readonly key: string
  /** The rejection probability the call drew against. */
  readonly probability: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface AdaptiveThrottle {
  /**
   * Runs `self` unless the throttle rejects it for `key`, and records whether the backend accepted it:
   * `throttle.protect(self, key)`, or in a pipe `self.pipe(throttle.protect(key))`.
   */
  readonly protect: {
    (key: string): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LocallyRejected, R>
    <A, E, R>(self: Effect.Effect<A, E, R>, key: string): Effect.Effect<A, E | LocallyRejected, R>
  }
  /** The probability a call for `key` would be rejected now (0 for a key never seen). */
  readonly probability: (key: string) => Effect.Effect<number>
}

/**
 * Builds a throttle. Share one per client (build it once, or provide {@link layer} once): a throttle built
 * per call starts empty every time and never rejects anything. Throws `IllegalArgumentException` for `k < 1`,
 * a zero window or a non-integer bucket count.
 *
 * Metric: counter `effect_resilience_adaptive_throttle_rejections_total`, labelled `throttle` = `name` when given.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { AdaptiveThrottle } from "effect-resilience"
 *
 * declare const getQuote: Effect.Effect<number, "unavailable">
 *
 * const program = Effect.gen(function*() {
 *   const throttle = yield* AdaptiveThrottle.make({ k: 2, window: "2 minutes" })
 *   return yield* getQuote.pipe(throttle.protect("quotes.example.com"))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<AdaptiveThrottle> = internal.make

/**
 * A layer that builds one throttle for a tag of your choosing.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <I>(tag: Context.Tag<I, AdaptiveThrottle>, options?: Options) => Layer.Layer<I> = internal.layer

/**
 * Calls rejected locally, labelled `throttle`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const rejectionsTotal: Metric.Metric.Counter<number> = internal.rejectionsTotal
