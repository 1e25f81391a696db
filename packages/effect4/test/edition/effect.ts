import { it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Metric, Random, Schedule } from "effect"
import type { Fiber } from "effect"
import { TestClock as TC } from "effect/testing"

/** Which edition runs the suite (for the rare case whose expectation differs on purpose: say why where it is used). */
export const edition = "effect4" as "effect3" | "effect4"

/** What `Duration` functions accept (Effect 3: `DurationInput`). */
export type DurationInput = Duration.Input

/** `it.effect` with a `Scope` (Effect 3: `it.scoped`; Effect 4's `it.effect` provides one). */
export const scoped = it.effect

/** The TestClock: `adjust` and `setTime` (Effect 3: from "effect"; Effect 4: from "effect/testing"). */
export const TestClock = { adjust: TC.adjust, setTime: TC.setTime }

/** Starts `self` in a child fiber (Effect 3: `Effect.fork`). */
export const fork = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.forkChild(self)

/** Handles every typed failure (Effect 3: `Effect.catchAll`). */
export const catchAll =
  <E, A2, E2, R2>(f: (e: E) => Effect.Effect<A2, E2, R2>) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A | A2, E2, R | R2> => Effect.catch(self, f)

/** Runs `self` with a `Random` that draws `values` in turn, cycling (Effect 3: `Random.fixed`). */
export const withRandom = (values: ReadonlyArray<number>) => <A, E, R>(self: Effect.Effect<A, E, R>) => {
  let i = 0
  const next = () => values[i++ % values.length]!
  const random: Random.Random = {
    nextDoubleUnsafe: next,
    nextIntUnsafe: () => Math.floor(next() * Number.MAX_SAFE_INTEGER)
  } as Random.Random
  return Effect.provideService(self, Random.Random, random)
}

/** Whether the exit failed with a defect (Effect 3: `cause._tag === "Die"`). */
export const diedOf = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.isFailure(exit) && Cause.hasDies(exit.cause)

/** Whether the exit was interrupted (Effect 3: `Exit.isInterrupted`). */
export const interruptedOf = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.hasInterrupts(exit)

/** `schedule` that stops once `duration` has passed since its start (Effect 3: `Schedule.upTo(s, d)`). */
export const upTo = <Out, In, E, R>(schedule: Schedule.Schedule<Out, In, E, R>, duration: DurationInput) =>
  Schedule.upTo(schedule, { duration })

/** A counter's value for one set of attributes (Effect 3: `Metric.tagged(k, v)` then `Metric.value`). */
export const counterValue = (
  counter: Metric.Counter<number>,
  attributes: Record<string, string> = {}
): Effect.Effect<number> =>
  Effect.map(Metric.value(Metric.withAttributes(counter, attributes)), (state) => Number(state.count))
