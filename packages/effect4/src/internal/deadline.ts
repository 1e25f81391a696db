import { Clock, Context, Data, Duration, Effect, Fiber, Option, Predicate } from "effect"
import type * as Api from "../Deadline.js"
import { monotonicMillis, toMonotonic, toWall } from "./clock.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"
import { startWatched, timeoutWith } from "./timeout.js"
import * as validate from "./validate.js"

/**
 * The absolute deadline of the current fiber, or `undefined`: an instant of the monotonic reading of `Clock`
 * (`internal/clock.ts`), so a step of the wall clock moves no deadline; the API converts from and to epoch
 * milliseconds (`withDeadlineAt`, `current`). A forked fiber shares the context it was forked with, so children
 * see it; nothing a child does changes its parent's deadline.
 */
export const CurrentDeadline: Context.Reference<number | undefined> = Context.Reference<number | undefined>(
  "effect-resilience/Deadline/currentDeadline",
  { defaultValue: () => undefined }
)

/**
 * `(deadline, now, clock)` of the current fiber, read without allocating an effect per piece: `now` is the
 * monotonic reading of `clock`, as the deadline is.
 */
export const withDeadline = <A, E, R>(
  f: (deadline: number | undefined, now: number, clock: Clock.Clock) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    return f(fiber.getRef(CurrentDeadline), monotonicMillis(clock), clock)
  })

export class DeadlineExceeded extends Data.TaggedError("DeadlineExceeded")<{}> {
  override get message(): string {
    return "the deadline passed before the operation finished"
  }
}

export class AttemptTimeout extends Data.TaggedError("AttemptTimeout")<Fields<Api.AttemptTimeout>> {
  override get message(): string {
    return `the attempt timed out after ${Duration.format(this.timeout)}`
  }
}

const isExceeded = (u: unknown): boolean => Predicate.isTagged(u, "DeadlineExceeded")

/** See `Deadline.isTimeUp`: read by tag and field, so errors of every copy of the library are recognised. */
export const isTimeUp = <E>(error: E): error is Api.TimeUp<E> => {
  if (!Predicate.hasProperty(error, "_tag")) return false
  switch (error._tag) {
    case "DeadlineExceeded":
      return true
    case "RetriesExhausted":
    case "RateLimited":
      return (error as { readonly reason?: unknown }).reason === "deadline"
    case "Fatal":
    case "Retryable":
      return isExceeded((error as { readonly cause?: unknown }).cause)
    default:
      return false
  }
}

// Each combinator is a typed builder (validates once, returns the data-last function; internal callers use it)
// and its dual, whose overloads the public module declares.

export const withinOf = (duration: Duration.Input) => {
  const budget = validate.millis("Deadline.within duration", duration)
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    withDeadline((deadline, now, clock) => {
      const own = now + budget
      return runUntil(self, deadline === undefined || own < deadline ? own : deadline, now, clock)
    })
}
export const within = compiled(withinOf)

export const withDeadlineAtOf = (epochMillis: number) => {
  if (typeof epochMillis !== "number" || Number.isNaN(epochMillis)) {
    validate.invalid("Deadline.withDeadlineAt needs a number of epoch milliseconds")
  }
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    withDeadline((deadline, now, clock) => {
      const at = toMonotonic(clock, epochMillis)
      return runUntil(self, deadline === undefined || at < deadline ? at : deadline, now, clock)
    })
}
export const withDeadlineAt = compiled(withDeadlineAtOf)

export const timeoutOf = (duration: Duration.Input) => {
  const own = validate.millis("Deadline.timeout duration", duration)
  const timeout = Duration.millis(own)
  const timedOut = () => new AttemptTimeout({ timeout })
  // one mask for the whole step: the deadline and the clock are read inside it, where the child starts
  return <A, E, R>(self: Effect.Effect<A, E, R>) =>
    Effect.uninterruptibleMask((restore): Effect.Effect<A, E | AttemptTimeout | DeadlineExceeded, R> => {
      const fiber = Fiber.getCurrent()!
      const clock = fiber.getRef(Clock.Clock)
      const now = monotonicMillis(clock)
      const deadline = fiber.getRef(CurrentDeadline)
      // the caller's deadline comes first: the child runs under it already (it is in the caller's context)
      if (deadline !== undefined && now + own >= deadline) {
        return deadline <= now ? Effect.fail(exceeded()) : startWatched(self, deadline, clock, exceeded, restore, fiber)
      }
      if (own <= 0) return Effect.fail(timedOut())
      return startWatched(self, now + own, clock, timedOut, restore, fiber)
    })
}
export const timeout = compiled(timeoutOf)

export const remaining: Effect.Effect<Option.Option<Duration.Duration>> = withDeadline((deadline, now) =>
  Effect.succeed(deadline === undefined ? Option.none() : Option.some(Duration.millis(Math.max(0, deadline - now))))
)

export const current: Effect.Effect<Option.Option<number>> = withDeadline((deadline, _, clock) =>
  Effect.succeed(deadline === undefined ? Option.none() : Option.some(toWall(clock, deadline)))
)

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
    : Effect.andThen(
      // the current span says how much time the effect was given (the caller's deadline may have clipped it)
      Effect.annotateCurrentSpan("deadline.remaining_ms", deadline - now),
      Effect.provideService(timeoutWith(self, deadline, clock, exceeded), CurrentDeadline, deadline)
    )
