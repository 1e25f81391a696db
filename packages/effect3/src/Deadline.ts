/**
 * A deadline is the time budget of a whole operation, retries included. It is an absolute instant
 * carried by the fiber: forked fibers inherit it, nested calls see what is left of it, and a nested
 * `within` can only shorten it. The instant is kept on the monotonic reading of Effect's `Clock`, so a step
 * of the wall clock (an NTP step, a VM resumed) neither shortens nor lengthens it.
 *
 * @since 0.1.0
 */
import type { Cause, Duration, Effect, Option } from "effect"
import type { Fatal, Retryable } from "./Failure.js"
import * as internal from "./internal/deadline.js"
import type { Fields } from "./internal/errorFields.js"
import type { RateLimited } from "./RateLimiter.js"
import type { RetriesExhausted } from "./Retry.js"

/**
 * The deadline passed before the work finished. The work was interrupted and its finalizers ran.
 *
 * @since 0.1.0
 * @category errors
 */
export const DeadlineExceeded: new() => DeadlineExceeded = internal.DeadlineExceeded

/**
 * The error's type.
 *
 * @since 0.1.0
 * @category errors
 */
export interface DeadlineExceeded extends Cause.YieldableError {
  readonly _tag: "DeadlineExceeded"
}

/**
 * One attempt ran longer than its own timeout (the deadline, if any, had not passed yet).
 *
 * `new AttemptTimeout({ … })` takes `Fields<AttemptTimeout>`: the fields that the interface {@link AttemptTimeout}
 * declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const AttemptTimeout: new(args: Fields<AttemptTimeout>) => AttemptTimeout = internal.AttemptTimeout

/**
 * The error's type.
 *
 * @since 0.1.0
 * @category errors
 */
export interface AttemptTimeout extends Cause.YieldableError {
  readonly _tag: "AttemptTimeout"
  /** The attempt's own timeout, which it ran past. */
  readonly timeout: Duration.Duration
}

/**
 * Runs `self` with the deadline `min(current deadline, now + duration)`. When it passes, `self` is
 * interrupted (its finalizers run) and the result fails with {@link DeadlineExceeded}. A deadline that has
 * already passed (a zero `duration`, say) fails at once without running `self`. `self` runs in a fiber of its
 * own: FiberRef changes made inside it stay inside, as with {@link timeout}.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Deadline } from "effect-resilience"
 *
 * declare const placeOrder: Effect.Effect<string>
 *
 * // the whole operation, retries included, gets two seconds
 * const bounded = placeOrder.pipe(Deadline.within("2 seconds"))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const within: {
  (
    duration: Duration.DurationInput
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeadlineExceeded, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, duration: Duration.DurationInput): Effect.Effect<A, E | DeadlineExceeded, R>
} = internal.within

/**
 * Runs `self` under an absolute deadline in epoch milliseconds (as `Clock.currentTimeMillis` counts
 * them), never later than the current one. Useful where a deadline arrives from outside, e.g. a header.
 * The time left is taken from the wall clock once, here; a later step of the wall clock does not move it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withDeadlineAt: {
  (epochMillis: number): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeadlineExceeded, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, epochMillis: number): Effect.Effect<A, E | DeadlineExceeded, R>
} = internal.withDeadlineAt

/**
 * The time left before the current deadline: `none` when there is no deadline, never negative.
 *
 * @since 0.1.0
 * @category getters
 */
export const remaining: Effect.Effect<Option.Option<Duration.Duration>> = internal.remaining

/**
 * The current deadline as epoch milliseconds, or `none`: the wall clock's time now plus what is left.
 *
 * @since 0.1.0
 * @category getters
 */
export const current: Effect.Effect<Option.Option<number>> = internal.current

/**
 * A per-attempt timeout of `min(duration, remaining)`. Fails with {@link AttemptTimeout} when its own
 * duration ran out, with {@link DeadlineExceeded} when the deadline did (or had already passed, in
 * which case `self` is not started at all). A zero `duration` has already run out: `self` is not started.
 * `self` runs in a fiber of its own: FiberRef changes made inside it stay inside.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Deadline } from "effect-resilience"
 *
 * declare const fetchUser: Effect.Effect<string>
 *
 * // each attempt gets 300 ms, or less if the deadline is closer
 * const attempt = fetchUser.pipe(Deadline.timeout("300 millis"))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const timeout: {
  (duration: Duration.DurationInput): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | AttemptTimeout | DeadlineExceeded, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    duration: Duration.DurationInput
  ): Effect.Effect<A, E | AttemptTimeout | DeadlineExceeded, R>
} = internal.timeout

/**
 * Every error that means "the deadline ran out", whatever gave up: {@link DeadlineExceeded} itself;
 * `RetriesExhausted` with reason `"deadline"` (the next retry would have started too late) and `RateLimited`
 * with reason `"deadline"` (waiting for the limiter would have passed it); a `Fatal` or `Retryable` whose
 * `cause` is a `DeadlineExceeded` (`Deadline.timeout` inside a classifier: `Failure.retryWhen` makes it a
 * `Fatal`). `AttemptTimeout` is not one: that attempt ran out of its own time, not the caller's.
 *
 * @since 0.1.0
 * @category models
 */
export type TimeUpError =
  | DeadlineExceeded
  | (RetriesExhausted<unknown> & { readonly reason: "deadline" })
  | (RateLimited & { readonly reason: "deadline" })
  | ((Fatal<unknown> | Retryable<unknown>) & { readonly cause: DeadlineExceeded })

/**
 * The members of `E` that {@link isTimeUp} accepts (all of {@link TimeUpError} when `E` is `unknown`).
 *
 * @since 0.1.0
 * @category models
 */
export type TimeUp<E> = unknown extends E ? E & TimeUpError
  :
    | Extract<E, DeadlineExceeded>
    | (Extract<E, RetriesExhausted<any>> & { readonly reason: "deadline" })
    | (Extract<E, RateLimited> & { readonly reason: "deadline" })
    | (Extract<E, Fatal<any> | Retryable<any>> & { readonly cause: DeadlineExceeded })

/**
 * Whether `error` says the deadline ran out — the one question for the several errors that can say it
 * (see {@link TimeUpError}): a deadline can pass during an attempt (`DeadlineExceeded`), between attempts
 * (`RetriesExhausted`, reason `"deadline"`) or while waiting for a rate limiter (`RateLimited`, reason
 * `"deadline"`), depending only on when it ran out. `AttemptTimeout` is not time up: the attempt ran out, the
 * caller still has time.
 *
 * A refinement: with `Effect.catchIf` it handles exactly those errors, and removes from the error type only what
 * it handled in full (`DeadlineExceeded`; a `RetriesExhausted` may still have another reason).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, Deadline, Failure, Retry } from "effect-resilience"
 *
 * declare const fetchPrice: Effect.Effect<number, { readonly _tag: "Unavailable" }>
 * declare const cachedPrice: Effect.Effect<number>
 *
 * const price = fetchPrice.pipe(
 *   Deadline.timeout("300 millis"),
 *   Failure.retryWhen((e) => e._tag === "AttemptTimeout" || e._tag === "Unavailable"),
 *   Retry.retry({ schedule: Backoff.fullJitter({ base: "50 millis", cap: "500 millis" }), maxAttempts: 5 }),
 *   Deadline.within("1 second"),
 *   // however the second ran out: the cached price
 *   Effect.catchIf(Deadline.isTimeUp, () => cachedPrice)
 * )
 * ```
 *
 * @since 0.1.0
 * @category refinements
 */
export const isTimeUp: <E>(error: E) => error is TimeUp<E> = internal.isTimeUp
