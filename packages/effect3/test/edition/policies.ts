// What the policies' suites (Backoff, Deadline, wallClockStep, the vectors) need that the editions spell differently.
import { Clock, Effect, FiberRef, type Schedule } from "effect"

/**
 * The outputs of `n` steps of one run of `schedule`, each at time 0 with no input (Effect 4: `Schedule.toStep`).
 */
export const scheduleOutputs = <Out>(schedule: Schedule.Schedule<Out>, n: number): Effect.Effect<Array<Out>> =>
  Effect.gen(function*() {
    let state = schedule.initial
    const out: Array<Out> = []
    for (let i = 0; i < n; i++) {
      const [next, output] = yield* schedule.step(0, undefined, state)
      state = next
      out.push(output)
    }
    return out
  })

/** The scheduler the current fiber runs on (Effect 4: the `Scheduler.Scheduler` reference). */
export const currentScheduler: Effect.Effect<unknown> = FiberRef.get(FiberRef.currentScheduler)

/**
 * Runs `self` on the current clock with `skew()` milliseconds added to every reading of the time, millis and nanos
 * (its sleeps unchanged): work that blocks for a while without sleeping (Effect 4: the monotonic reading too).
 */
export const withClockSkew = (skew: () => number) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.clockWith((clock) => {
    const now = () => clock.unsafeCurrentTimeMillis() + skew()
    const nanos = () => BigInt(now()) * BigInt(1_000_000)
    const skewed: Clock.Clock = {
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: now,
      currentTimeMillis: Effect.sync(now),
      unsafeCurrentTimeNanos: nanos,
      currentTimeNanos: Effect.sync(nanos),
      sleep: (duration) => clock.sleep(duration)
    }
    return Effect.withClock(self, skewed)
  })

/** The server's request and response modules (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export { HttpServerRequest, HttpServerResponse } from "@effect/platform"
