// What the policies' suites (Backoff, Deadline, wallClockStep, the vectors) need that the editions spell differently.
import { Clock, Effect, Schedule, Scheduler } from "effect"

/**
 * The outputs of `n` steps of one run of `schedule`, each at time 0 with no input (Effect 3: `schedule.initial`
 * and `schedule.step`).
 */
export const scheduleOutputs = <Out>(schedule: Schedule.Schedule<Out>, n: number): Effect.Effect<Array<Out>> =>
  Effect.gen(function*() {
    const step = yield* Schedule.toStep(schedule)
    const out: Array<Out> = []
    for (let i = 0; i < n; i++) out.push((yield* step(0, undefined))[0])
    return out
  }).pipe(Effect.orDie)

/** The scheduler the current fiber runs on (Effect 3: `FiberRef.currentScheduler`). */
export const currentScheduler: Effect.Effect<unknown> = Scheduler.Scheduler

/**
 * Runs `self` on the current clock with `skew()` milliseconds added to every reading of the time, wall and monotonic
 * (its sleeps unchanged): work that blocks for a while without sleeping (Effect 3: `Effect.withClock`, no
 * monotonic reading of its own).
 */
export const withClockSkew = (skew: () => number) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Clock.Clock, (clock: Clock.Clock) => {
    const now = () => clock.currentTimeMillisUnsafe() + skew()
    const nanos = () => BigInt(now()) * BigInt(1_000_000)
    const skewed: Clock.Clock = {
      currentTimeMillisUnsafe: now,
      currentTimeMillis: Effect.sync(now),
      currentTimeNanosUnsafe: nanos,
      currentTimeNanos: Effect.sync(nanos),
      monotonicTimeNanosUnsafe: nanos,
      monotonicTimeNanos: Effect.sync(nanos),
      sleep: (duration) => clock.sleep(duration)
    }
    return Effect.provideService(self, Clock.Clock, skewed)
  })

/** The server's request and response modules (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export { HttpServerRequest, HttpServerResponse } from "effect/http"
