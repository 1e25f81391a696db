/**
 * A circuit breaker stops calling a dependency that is failing, so callers fail fast instead of piling
 * up behind timeouts, and the dependency gets room to recover.
 *
 * - **closed**: calls run; their outcomes feed the trip policy ({@link consecutive} or {@link failureRate}).
 * - **open**: calls fail at once with {@link CircuitOpen}, for `openFor` (a duration or a `Schedule` that
 *   backs off over repeated openings).
 * - **half-open**: up to `halfOpenPermits` trial calls run; when all of them succeed the breaker closes,
 *   when one fails it opens again (with `halfOpenFailureRate`, the period is judged once all its trials have
 *   ended), and when trials are still running at the period's `halfOpenTimeout` it opens again too. Other
 *   callers fail fast meanwhile. At most `halfOpenPermits` trials hold a permit at any moment,
 *   counting those still running from an earlier half-open period (until that period's `halfOpenTimeout`).
 *
 * Time comes only from `Clock`, so the breaker is deterministic under `TestClock`.
 *
 * @since 1.0.0
 */
import type * as breakerWindow from "@effect-resilience/core/breakerWindow"
import type { Cause, Context, Duration, Effect, Layer, Metric, PubSub, Schedule, Scope, Stream } from "effect"
import * as internal from "./internal/circuitBreaker/breaker.js"
import * as keyedInternal from "./internal/circuitBreaker/keyed.js"
import * as policy from "./internal/circuitBreaker/policy.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * The breaker is open (or half-open with every trial permit taken): the call was not run.
 * `retryAfter` is the time left open; in half-open with every permit taken, the time left in the half-open
 * period (never zero); infinite while the breaker is isolated.
 *
 * `new CircuitOpen({ … })` takes `Fields<CircuitOpen>`: the fields that the interface {@link CircuitOpen} declares,
 * without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const CircuitOpen: new(args: Fields<CircuitOpen>) => CircuitOpen = internal.CircuitOpen

/**
 * The error's type.
 *
 * @since 1.0.0
 * @category errors
 */
export interface CircuitOpen extends Cause.YieldableError {
  readonly _tag: "CircuitOpen"
  /**
   * When to try again: the time left open; in half-open with every permit taken, the time left in the
   * half-open period (its `halfOpenTimeout`, or sooner if the trials end first) — never zero; infinite while
   * the breaker is isolated.
   */
  readonly retryAfter: Duration.Duration
  /**
   * The failure that last opened the breaker — the typed failure or the defect of the call (or the last
   * failed trial of the half-open sample) whose outcome opened it —, so a caller can log why. Absent when no
   * failure opened it: isolated, a half-open period that timed out, a slow call that succeeded, and for a
   * fleet breaker, an opening caused by another replica's calls.
   */
  readonly lastFailure?: unknown
}

/**
 * @since 1.0.0
 * @category models
 */
export type State = "closed" | "open" | "half-open"

/**
 * One state change. `at` is `Clock` epoch milliseconds.
 *
 * @since 1.0.0
 * @category models
 */
export interface Transition {
  readonly from: State
  readonly to: State
  readonly at: number
}

/**
 * Trip after `failures` failed calls in a row (a success resets the count). Built by {@link consecutive}.
 *
 * @since 1.0.0
 * @category models
 */
export interface Consecutive {
  readonly _tag: "Consecutive"
  readonly failures: number
}

/**
 * The calls a failure rate is computed over.
 *
 * - `{ calls: 100 }`: the last 100 calls (a count window);
 * - `{ duration: "10 seconds", buckets: 10 }`: the calls of the last 10 seconds, kept in 10 buckets of one
 *   second (a time window, as in resilience4j and Polly). `buckets` defaults to 10; the oldest bucket is
 *   dropped whole, so the window covers between `duration - duration / buckets` and `duration`.
 *
 * @since 1.0.0
 * @category models
 */
export type Window =
  | { readonly calls: number }
  | { readonly duration: Duration.Input; readonly buckets?: number }

/**
 * Calls slower than `duration` are slow; when the share of slow calls in the window reaches
 * `rateThreshold` (in `(0, 1]`) the breaker opens, even if they succeeded. In half-open a slow trial
 * counts as a failed one.
 *
 * @since 1.0.0
 * @category models
 */
export interface SlowCall {
  readonly duration: Duration.Input
  readonly rateThreshold: number
}

/**
 * @since 1.0.0
 * @category models
 */
export interface FailureRateOptions {
  /** Open when `failures / calls >= threshold`; in `(0, 1]`. */
  readonly threshold: number
  /** No decision before the window holds this many calls; an integer >= 1 (and <= `calls` of a count window). */
  readonly minimumCalls: number
  readonly window: Window
  readonly slowCall?: SlowCall
}

/**
 * Trip on the failure rate (and optionally the slow-call rate) over a window. Built by {@link failureRate}.
 *
 * @since 1.0.0
 * @category models
 */
export type FailureRate = breakerWindow.FailureRate

/**
 * @since 1.0.0
 * @category models
 */
export type TripPolicy = Consecutive | FailureRate

/**
 * The counters of a trip policy inside a {@link Snapshot}, told apart by `_tag`: `"Consecutive"` (the
 * failures in a row), `"Count"` (the last calls' outcomes, oldest first: bit 1 failed, bit 2 slow) or
 * `"Time"` (the buckets holding calls: index since the epoch, calls, failures, slow calls). Restoring
 * one taken with a different policy starts the window empty instead.
 *
 * @since 1.0.0
 * @category models
 */
export type WindowSnapshot = breakerWindow.Snapshot

/**
 * The state of a breaker as plain JSON (cockatiel's `toJSON`), to keep it across restarts — e.g. in a
 * serverless function — and give it back as `initialState`. A half-open breaker is restored half-open
 * with no trial running; an open one stays open until `openUntil`.
 *
 * @since 1.0.0
 * @category models
 */
export interface Snapshot {
  readonly state: State
  /** Held open by `isolate` until `reset`. */
  readonly isolated: boolean
  /** Epoch milliseconds at which an open breaker turns half-open; `null` when not open or isolated. */
  readonly openUntil: number | null
  /** Openings since the breaker was last closed: how far the `openFor` schedule has advanced. */
  readonly openings: number
  readonly window: WindowSnapshot
}

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /** When to open: {@link consecutive} or {@link failureRate}. */
  readonly trip: TripPolicy
  /**
   * How long to stay open before a trial. A `Schedule` is stepped once per opening (its delay is used, its
   * output is not: `Schedule.spaced` and `Backoff` schedules alike; its input is the opening's number), and
   * starts over when the breaker closes; when it ends, its last delay is reused. It must be synchronous
   * (every `Schedule` built from Effect's constructors and `Backoff` is) and give a delay at its first
   * step: it is probed once when the breaker is built (with Effect's default services), and one that is
   * done at once, fails or is asynchronous is rejected with `IllegalArgumentError`.
   */
  readonly openFor: Duration.Input | Schedule.Schedule<unknown, number>
  /**
   * Trial calls let through in half-open, all of which must succeed to close (unless `halfOpenFailureRate`).
   * An integer >= 1; default 1.
   */
  readonly halfOpenPermits?: number
  /**
   * How long a half-open period's trials may run, counted from a trial that found none of the period's
   * running: when trials are still running by then, the breaker opens again (for `openFor`'s next delay), they
   * lose their permits, and their late outcomes decide nothing. A period with no trial running waits for
   * callers as long as it takes. So a trial that hangs cannot hold the breaker in
   * half-open. A positive, finite duration; default: the `openFor` delay of the opening before that half-open
   * period (a schedule's step for it; not lengthened by `openForAtLeast`). Make it longer than your slowest
   * healthy call when `openFor` is shorter than that.
   */
  readonly halfOpenTimeout?: Duration.Input
  /**
   * Judge a half-open period on a sample instead of on its first failure: wait for all `halfOpenPermits`
   * trials, then close when `failed / halfOpenPermits` is below this rate, else open again. In `(0, 1]`;
   * default none: any failed trial opens the breaker again at once. Ignored trials are not in the sample (they
   * give their permit back), and a period whose trials have not all ended by its `halfOpenTimeout` opens again
   * whatever its sample says so far.
   */
  readonly halfOpenFailureRate?: number
  /**
   * Which typed failures count against the dependency. Default: all but `Fatal` (a 404 is not an
   * outage), so `AttemptTimeout` and `DeadlineExceeded` count. A failure that does not count is a success
   * for the breaker. Defects always count; interruption never does.
   */
  readonly isFailure?: (error: unknown) => boolean
  /**
   * Typed failures that count as neither a success nor a failure (resilience4j's `ignoreExceptions`): the
   * trip policy does not see them, and a half-open trial that ends with one gives its permit back and decides
   * nothing. Asked before `isFailure`. Default: none. Defects are never ignored; interruption always is.
   */
  readonly isIgnored?: (error: unknown) => boolean
  /**
   * How long the dependency itself asked to be left alone, read from the failure that opens the breaker —
   * e.g. a 503's `Retry-After`. When it is longer than `openFor`'s delay, the breaker stays open that long
   * instead. Default: none (`ResilientHttpClient`'s breakers read a `Retryable`'s `retryAfter`).
   */
  readonly openForAtLeast?: (error: unknown) => Duration.Duration | undefined
  /** Tags the breaker's metrics (`breaker` label). */
  readonly name?: string
  /**
   * A {@link Snapshot} to start from. A malformed snapshot throws `IllegalArgumentError`, except its
   * `window`: a missing, `null` or unknown one starts the counters empty.
   */
  readonly initialState?: Snapshot
  /**
   * Called for every transition, in order, from the breaker's own fiber (so a slow callback never delays a
   * call). A failure or defect of the callback is logged and ignored.
   */
  readonly onTransition?: (transition: Transition) => Effect.Effect<void>
}

/**
 * @since 1.0.0
 * @category models
 */
export interface CircuitBreaker {
  /**
   * Runs `self` when the breaker allows it and records the outcome; fails with {@link CircuitOpen}
   * without running it otherwise.
   */
  readonly protect: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CircuitOpen, R>
  /** The current state (an open breaker whose `openFor` has passed reads as half-open). */
  readonly state: Effect.Effect<State>
  /**
   * Every transition from the moment the stream is *run*. A stream forked just before the breaker trips may
   * not be running yet and miss that transition: to observe every one, use {@link CircuitBreaker.subscribe}
   * or the `onTransition` option.
   */
  readonly changes: Stream.Stream<Transition>
  /**
   * A subscription to every transition from the moment this effect returns (live then: it is
   * `PubSub.subscribe`), for as long as the scope lasts; read it with `PubSub.take`.
   */
  readonly subscribe: Effect.Effect<PubSub.Subscription<Transition>, never, Scope.Scope>
  /** Opens the breaker and holds it open until {@link CircuitBreaker.reset}. */
  readonly isolate: Effect.Effect<void>
  /** Closes the breaker, clearing its counters and restarting the `openFor` schedule. */
  readonly reset: Effect.Effect<void>
  /** The state as JSON-able data, for `initialState`. */
  readonly snapshot: Effect.Effect<Snapshot>
}

/**
 * Opens after `n` failed calls in a row. Throws `IllegalArgumentError` unless `n` is an integer >= 1.
 *
 * @example
 * ```ts
 * import { CircuitBreaker } from "effect-resilience"
 *
 * const trip = CircuitBreaker.consecutive(5)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const consecutive: (n: number) => Consecutive = policy.consecutive

/**
 * Opens when at least `threshold` of the calls in `window` failed (or, with `slowCall`, were slow), once the
 * window holds `minimumCalls` calls. Throws `IllegalArgumentError` for a threshold outside `(0, 1]`,
 * a `minimumCalls` that is not an integer >= 1 or exceeds a count window, or a malformed window.
 *
 * @example
 * ```ts
 * import { CircuitBreaker } from "effect-resilience"
 *
 * // half of the last 100 calls failed, counting from 20 calls on
 * const byCount = CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { calls: 100 } })
 *
 * // a quarter of the last 10 seconds' calls failed or took over 2 seconds
 * const byTime = CircuitBreaker.failureRate({
 *   threshold: 0.25,
 *   minimumCalls: 10,
 *   window: { duration: "10 seconds", buckets: 10 },
 *   slowCall: { duration: "2 seconds", rateThreshold: 0.25 }
 * })
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const failureRate: (options: FailureRateOptions) => FailureRate = policy.failureRate

/**
 * Builds a breaker that lives as long as the scope. Throws `IllegalArgumentError` for invalid options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, CircuitBreaker } from "effect-resilience"
 *
 * declare const fetchPrices: Effect.Effect<ReadonlyArray<number>, Error>
 *
 * const program = Effect.gen(function*() {
 *   const breaker = yield* CircuitBreaker.make({
 *     trip: CircuitBreaker.consecutive(5),
 *     // 1 s, 2 s, 4 s, ... at most a minute; back to 1 s once it closes
 *     openFor: Backoff.exponential({ base: "1 second", cap: "1 minute" }),
 *     name: "prices"
 *   })
 *   return yield* breaker.protect(fetchPrices).pipe(
 *     Effect.catchTag("CircuitOpen", () => Effect.succeed([]))
 *   )
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (options: Options) => Effect.Effect<CircuitBreaker, never, Scope.Scope> = internal.make

/**
 * A layer building one breaker for a tag of your choosing.
 *
 * @example
 * ```ts
 * import { Context, Effect } from "effect"
 * import { CircuitBreaker } from "effect-resilience"
 *
 * class PaymentsBreaker extends Context.Service<PaymentsBreaker, CircuitBreaker.CircuitBreaker>()("PaymentsBreaker") {}
 *
 * const PaymentsBreakerLive = CircuitBreaker.layer(PaymentsBreaker, {
 *   trip: CircuitBreaker.consecutive(3),
 *   openFor: "30 seconds"
 * })
 *
 * declare const charge: Effect.Effect<string, Error>
 *
 * const program = Effect.gen(function*() {
 *   const breaker = yield* PaymentsBreaker
 *   return yield* breaker.protect(charge)
 * }).pipe(Effect.provide(PaymentsBreakerLive))
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: <I>(tag: Context.Key<I, CircuitBreaker>, options: Options) => Layer.Layer<I> = internal.layer

/**
 * @since 1.0.0
 * @category models
 */
export interface KeyedOptions extends Omit<Options, "initialState"> {
  /**
   * Breakers kept at most; beyond it the least recently used one is dropped (and starts closed if its key
   * comes back). An integer >= 1 or `Infinity`; default 1,000. Keys from outside (hosts, tenants) should
   * stay bounded by it.
   */
  readonly maxKeys?: number
  /**
   * Label each breaker's metrics with its key (`key` attribute, the key as a string), for a state gauge per
   * key. The metric registry keeps every attribute set it was given, so **every key ever seen costs metric
   * series** for the life of the process — `maxKeys` bounds the breakers, not the series. Turn it on only for
   * keys from a small, known set. A dropped breaker's gauge is set back to 0 (closed). Default `false`:
   * the breakers count transitions and rejections under the `breaker` label only, and do not report
   * the state gauge (one gauge cannot hold many breakers' states).
   */
  readonly keyLabel?: boolean
}

/**
 * One breaker per key, e.g. per HTTP origin, each built from the same options on first use.
 *
 * @since 1.0.0
 * @category models
 */
export interface Keyed<K> {
  /** The breaker of `key`, built on first use. */
  readonly get: (key: K) => Effect.Effect<CircuitBreaker>
  /**
   * `protect` with the breaker of `key`: `keyed.protect(self, key)`, or in a pipe
   * `self.pipe(keyed.protect(key))`.
   */
  readonly protect: {
    (key: K): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CircuitOpen, R>
    <A, E, R>(self: Effect.Effect<A, E, R>, key: K): Effect.Effect<A, E | CircuitOpen, R>
  }
  /** The keys that have a breaker now, least recently used first. */
  readonly keys: Effect.Effect<ReadonlyArray<K>>
}

/**
 * A registry of breakers, one per key. Their metrics carry the `breaker` label (the `name` option) only,
 * unless `keyLabel` is set (see {@link KeyedOptions}). Throws `IllegalArgumentError` for invalid options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { CircuitBreaker } from "effect-resilience"
 *
 * declare const get: (url: URL) => Effect.Effect<string, Error>
 *
 * const program = Effect.gen(function*() {
 *   const breakers = yield* CircuitBreaker.keyed<string>({
 *     trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { duration: "30 seconds" } }),
 *     openFor: "10 seconds",
 *     maxKeys: 500
 *   })
 *   const url = new URL("https://api.example.com/prices")
 *   return yield* breakers.protect(get(url), url.origin)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const keyed: <K = string>(options: KeyedOptions) => Effect.Effect<Keyed<K>, never, Scope.Scope> =
  keyedInternal.keyed

/**
 * The breaker's state: 0 closed, 1 half-open, 2 open; labelled `breaker` (the `name` option) and, for
 * keyed breakers with `keyLabel`, `key` (keyed breakers without it do not report it).
 *
 * @since 1.0.0
 * @category metrics
 */
export const stateGauge: Metric.Gauge<number> = internal.stateGauge

/**
 * Transitions, labelled `breaker`, `key` (keyed breakers with `keyLabel`), then `from` and `to`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const transitionsTotal: Metric.Counter<number> = internal.transitions

/**
 * Calls refused with {@link CircuitOpen}, labelled `breaker` and `key` (keyed breakers with `keyLabel`).
 *
 * @since 1.0.0
 * @category metrics
 */
export const rejectionsTotal: Metric.Counter<number> = internal.rejections
