import { it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Metric, Random, Schedule, TestClock as TC } from "effect"

/** Which edition runs the suite (for the rare case whose expectation differs on purpose: say why where it is used). */
export const edition = "effect3" as "effect3" | "effect4"

/** What `Duration` functions accept (Effect 4: `Duration.Input`). */
export type DurationInput = Duration.DurationInput

/** `it.effect` with a `Scope` (Effect 3: `it.scoped`; Effect 4's `it.effect` provides one). */
export const scoped = it.scoped

/** The TestClock: `adjust` and `setTime` (Effect 3: from "effect"; Effect 4: from "effect/testing"). */
export const TestClock = { adjust: TC.adjust, setTime: TC.setTime }

/** Starts `self` in a child fiber (Effect 4: `Effect.forkChild`). */
export const fork = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> =>
  Effect.fork(self)

/** Handles every typed failure (Effect 4: `Effect.catch`). */
export const catchAll =
  <E, A2, E2, R2>(f: (e: E) => Effect.Effect<A2, E2, R2>) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A | A2, E2, R | R2> => Effect.catchAll(self, f)

/** Runs `self` with a `Random` that draws `values` in turn, cycling (Effect 4 has no `Random.fixed`). */
export const withRandom = (values: ReadonlyArray<number>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.withRandom(self, Random.fixed(values as [number, ...Array<number>]))

/** Whether the exit failed with a defect (Effect 4: `Cause.hasDies`). */
export const diedOf = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.isFailure(exit) && exit.cause._tag === "Die"

/** Whether the exit was interrupted (Effect 4: `Exit.hasInterrupts`). */
export const interruptedOf = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.isInterrupted(exit)

/** `schedule` that stops once `duration` has passed since its start (Effect 4: `Schedule.upTo(s, { duration })`). */
export const upTo = <Out, In, R>(schedule: Schedule.Schedule<Out, In, R>, duration: DurationInput) =>
  Schedule.upTo(schedule, duration)

/** A counter's value for one set of labels (Effect 4: `Metric.withAttributes` then `Metric.value`). */
export const counterValue = (
  counter: Metric.Metric.Counter<number>,
  attributes: Record<string, string> = {}
): Effect.Effect<number> =>
  Effect.map(
    Metric.value(Object.entries(attributes).reduce((m, [k, v]) => Metric.tagged(m, k, v), counter)),
    (state) => Number(state.count)
  )
