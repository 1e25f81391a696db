/**
 * A deadline is the time budget of a whole operation, retries included. It is an absolute instant
 * carried by the fiber: forked fibers inherit it, nested calls see what is left of it, and a nested
 * `within` can only shorten it.
 *
 * @since 1.0.0
 */
import type { Cause, Duration, Effect, Option } from "effect"
import * as internal from "./internal/deadline.js"
import type { Fields } from "./internal/errorFields.js"

/**
 * The deadline passed before the work finished. The work was interrupted and its finalizers ran.
 *
 * @since 1.0.0
 * @category errors
 */
export const DeadlineExceeded: new() => DeadlineExceeded = internal.DeadlineExceeded

/**
 * The error's type.
 *
 * @since 1.0.0
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
 * @since 1.0.0
 * @category errors
 */
export const AttemptTimeout: new(args: Fields<AttemptTimeout>) => AttemptTimeout = internal.AttemptTimeout

/**
 * The error's type.
 *
 * @since 1.0.0
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
 * own that shares the caller's context, as with {@link timeout}.
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
 * @since 1.0.0
 * @category combinators
 */
export const within: {
  (
    duration: Duration.Input
  ): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeadlineExceeded, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, duration: Duration.Input): Effect.Effect<A, E | DeadlineExceeded, R>
} = internal.within

/**
 * Runs `self` under an absolute deadline in epoch milliseconds (as `Clock.currentTimeMillis` counts
 * them), never later than the current one. Useful where a deadline arrives from outside, e.g. a header.
 *
 * @since 1.0.0
 * @category combinators
 */
export const withDeadlineAt: {
  (epochMillis: number): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeadlineExceeded, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, epochMillis: number): Effect.Effect<A, E | DeadlineExceeded, R>
} = internal.withDeadlineAt

/**
 * The time left before the current deadline: `none` when there is no deadline, never negative.
 *
 * @since 1.0.0
 * @category getters
 */
export const remaining: Effect.Effect<Option.Option<Duration.Duration>> = internal.remaining

/**
 * The current deadline as epoch milliseconds, or `none`.
 *
 * @since 1.0.0
 * @category getters
 */
export const current: Effect.Effect<Option.Option<number>> = internal.current

/**
 * A per-attempt timeout of `min(duration, remaining)`. Fails with {@link AttemptTimeout} when its own
 * duration ran out, with {@link DeadlineExceeded} when the deadline did (or had already passed, in
 * which case `self` is not started at all). A zero `duration` has already run out: `self` is not started.
 * `self` runs in a fiber of its own, which shares the caller's context.
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
 * @since 1.0.0
 * @category combinators
 */
export const timeout: {
  (duration: Duration.Input): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | AttemptTimeout | DeadlineExceeded, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    duration: Duration.Input
  ): Effect.Effect<A, E | AttemptTimeout | DeadlineExceeded, R>
} = internal.timeout
