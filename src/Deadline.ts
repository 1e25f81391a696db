/**
 * A deadline is the time budget of a whole operation, retries included. It is an absolute instant
 * carried by the fiber: forked fibers inherit it, nested calls see what is left of it, and a nested
 * `within` can only shorten it.
 *
 * @since 0.1.0
 */
import type { Clock } from "effect"
import { Data, Duration, Effect, Option } from "effect"
import { currentDeadline, withDeadline } from "./internal/deadline.js"
import { compiled } from "./internal/dual.js"
import { timeoutWith } from "./internal/timeout.js"
import * as validate from "./internal/validate.js"

/**
 * The deadline passed before the work finished. The work was interrupted and its finalizers ran.
 *
 * @since 0.1.0
 * @category errors
 */
export class DeadlineExceeded extends Data.TaggedError("DeadlineExceeded")<{}> {
  override get message(): string {
    return "the deadline passed before the operation finished"
  }
}

/**
 * One attempt ran longer than its own timeout (the deadline, if any, had not passed yet).
 *
 * @since 0.1.0
 * @category errors
 */
export class AttemptTimeout extends Data.TaggedError("AttemptTimeout")<{ readonly timeout: Duration.Duration }> {
  override get message(): string {
    return `the attempt timed out after ${Duration.format(this.timeout)}`
  }
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
} = compiled((duration: Duration.DurationInput) => {
  const budget = validate.millis("Deadline.within duration", duration)
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    withDeadline((deadline, now, clock) => {
      const own = now + budget
      return runUntil(self, deadline === undefined || own < deadline ? own : deadline, now, clock)
    })
})

/**
 * Runs `self` under an absolute deadline in epoch milliseconds (as `Clock.currentTimeMillis` counts
 * them), never later than the current one. Useful where a deadline arrives from outside, e.g. a header.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withDeadlineAt: {
  (epochMillis: number): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeadlineExceeded, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, epochMillis: number): Effect.Effect<A, E | DeadlineExceeded, R>
} = compiled((epochMillis: number) => {
  if (typeof epochMillis !== "number" || Number.isNaN(epochMillis)) {
    validate.invalid("Deadline.withDeadlineAt needs a number of epoch milliseconds")
  }
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    withDeadline((deadline, now, clock) =>
      runUntil(self, deadline === undefined || epochMillis < deadline ? epochMillis : deadline, now, clock)
    )
})

/**
 * The time left before the current deadline: `none` when there is no deadline, never negative.
 *
 * @since 0.1.0
 * @category getters
 */
export const remaining: Effect.Effect<Option.Option<Duration.Duration>> = withDeadline((deadline, now) =>
  Effect.succeed(deadline === undefined ? Option.none() : Option.some(Duration.millis(Math.max(0, deadline - now))))
)

/**
 * The current deadline as epoch milliseconds, or `none`.
 *
 * @since 0.1.0
 * @category getters
 */
export const current: Effect.Effect<Option.Option<number>> = withDeadline((deadline) =>
  Effect.succeed(Option.fromNullable(deadline))
)

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
} = compiled((duration: Duration.DurationInput) => {
  const own = validate.millis("Deadline.timeout duration", duration)
  const timeout = Duration.millis(own)
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    withDeadline<A, E | AttemptTimeout | DeadlineExceeded, R>((deadline, now, clock) => {
      if (deadline !== undefined && now + own >= deadline) return runUntil(self, deadline, now, clock)
      if (own <= 0) return Effect.fail(new AttemptTimeout({ timeout }))
      return timeoutWith(self, now + own, clock, () => new AttemptTimeout({ timeout }))
    })
})

const exceeded = () => new DeadlineExceeded()

/** Runs `self` under the deadline `deadline`; one that has passed (or is now) fails without running `self`. */
const runUntil = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  deadline: number,
  now: number,
  clock: Clock.Clock
): Effect.Effect<A, E | DeadlineExceeded, R> =>
  deadline <= now
    ? Effect.fail(exceeded())
    : Effect.locally(timeoutWith(self, deadline, clock, exceeded), currentDeadline, deadline)
