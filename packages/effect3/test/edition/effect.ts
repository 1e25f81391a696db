import { it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Metric, Option, Random, Schedule, TestClock as TC } from "effect"

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

/** The error a malformed option throws (Effect 4: `Cause.IllegalArgumentError`). */
export const IllegalArgument = Cause.IllegalArgumentException

/** The typed failure of an exit, if it failed with one (Effect 4: `Cause.findErrorOption`). */
export const failureOf = <E>(exit: Exit.Exit<unknown, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

/** The fiber's exit if it has ended, after letting it run (Effect 4: `fiber.pollUnsafe()`). */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Effect.map(Effect.zipRight(Effect.yieldNow(), Fiber.poll(fiber)), Option.getOrUndefined)

/** Runs `self` with `clock` as its Clock (Effect 4: `Effect.provideService(Clock.Clock, clock)`). */
export const withClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withClock(self, clock)

/** The fiber's Clock with its wall reading `millis` ahead; its nanosecond reading and its sleeps are the Clock's. */
export const wallClockAhead = (millis: number): Effect.Effect<Clock.Clock> =>
  Effect.map(Effect.clock, (test): Clock.Clock => ({
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => test.unsafeCurrentTimeMillis() + millis,
    currentTimeMillis: Effect.sync(() => test.unsafeCurrentTimeMillis() + millis),
    // Effect 3's monotonic reading: the edition measures durations on it, so it does not move
    unsafeCurrentTimeNanos: () => test.unsafeCurrentTimeNanos(),
    currentTimeNanos: Effect.sync(() => test.unsafeCurrentTimeNanos()),
    sleep: (d) => test.sleep(d)
  }))

/** Runs `self` with `attributes` on every metric it updates (Effect 4: `Metric.CurrentMetricAttributes`). */
export const withMetricAttributes =
  (attributes: Record<string, string>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Object.entries(attributes).reduce((e, [k, v]) => Effect.tagMetrics(e, k, v), self)

/** Runs `self` with its TestClock counting sleeps (Effect 3's TestClock does already: the identity). */
export const recordingSleeps = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => self

export { forkUntilSleeping } from "../support/eventually.js"

/** Virtual time moved by hand (`advance`, `stepWall`, `reset`), for tests that move it thousands of times. */
export { handClock } from "../support/handClock.js"
