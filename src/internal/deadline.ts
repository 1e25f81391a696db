import { Clock, Context, Effect, FiberRef } from "effect"
import { globalValue } from "effect/GlobalValue"

/**
 * The absolute deadline (epoch millis from `Clock`) of the current fiber, or `undefined`.
 * Children inherit it on fork; a joined child never changes its parent's deadline.
 */
export const currentDeadline: FiberRef.FiberRef<number | undefined> = globalValue(
  "effect-resilience/Deadline/currentDeadline",
  () => FiberRef.unsafeMake<number | undefined>(undefined, { fork: (a) => a, join: (parent) => parent })
)

/** `(deadline, now, clock)` of the current fiber, read without allocating an effect per piece. */
export const withDeadline = <A, E, R>(
  f: (deadline: number | undefined, now: number, clock: Clock.Clock) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    return f(fiber.getFiberRef(currentDeadline), clock.unsafeCurrentTimeMillis(), clock)
  })
