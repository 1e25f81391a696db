import { it } from "@effect/vitest"
import { Cause, Clock, Context, Duration, Effect, Exit, Metric, Option, Random, Schedule, Scope } from "effect"
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

/** The fiber `fork` returns (Effect 3: `Fiber.RuntimeFiber`). */
export type Forked<A, E = never> = Fiber.Fiber<A, E>

/** The fiber's exit if it has ended, else `undefined` (Effect 3: `fiber.unsafePoll()`, `null` while running). */
export const pollUnsafe = <A, E>(fiber: Forked<A, E>): Exit.Exit<A, E> | undefined => fiber.pollUnsafe()

/** Yields to the other fibers once (Effect 3: `Effect.yieldNow()`, a function). */
export const yieldNow: Effect.Effect<void> = Effect.yieldNow

/** Runs `self` with a `Random` whose every draw is `draw()` (Effect 3: a `Random` whose `next` calls it). */
export const withRandomDraw = (draw: () => number) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.provideService(self, Random.Random, {
    nextDoubleUnsafe: draw,
    nextIntUnsafe: () => Math.floor(draw() * Number.MAX_SAFE_INTEGER)
  })

/** Runs `self` with a `Random` seeded with `seed` (Effect 3: `Effect.withRandom(Random.make(seed))`). */
export const withSeed = (seed: string | number) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Random.withSeed(self, seed)

/** A gauge's value for one set of attributes (Effect 3: `Metric.tagged(k, v)` then `Metric.value`). */
export const gaugeValue = (
  gauge: Metric.Gauge<number>,
  attributes: Record<string, string> = {}
): Effect.Effect<number> =>
  Effect.map(Metric.value(Metric.withAttributes(gauge, attributes)), (state) => Number(state.value))

/** A service key (Effect 3: `Context.GenericTag<I, S>(key)`). */
export const Tag = <I, S = I>(key: string): Context.Service<I, S> => Context.Service<I, S>(key)

/** Provides `scope` to `self` without closing it (Effect 3: `Scope.extend`). */
export const provideScope = (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Scope.provide(self, scope)

/** Runs `self` on `clock` (Effect 3: `Effect.withClock`). */
export const provideClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.provideService(self, Clock.Clock, clock)

/** Virtual time moved by hand (`advance`, `stepWall`; test/support/handClock.ts, one per edition). */
export { handClock } from "../support/handClock.js"

/** fast-check (Effect 3: `FastCheck` from "effect", fast-check 3; Effect 4 no longer ships it: fast-check 4). */
export * as fc from "fast-check"

/** A synchronous property over fast-check arbitraries, `prop(name, [arbitraries], ([values]) => …)` (Effect 3: `it.prop`). */
export { prop } from "../support/prop.js"

/** The error the library throws for bad options (Effect 3: `Cause.IllegalArgumentException`). */
export const IllegalArgument = Cause.IllegalArgumentError

/** Whether the exit was interrupted and nothing else (Effect 3: `Cause.isInterruptedOnly`). */
export const interruptedOnlyOf = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)

/** The exit's first typed failure, if any (Effect 3: `Cause.failureOption`). */
export const errorOf = <E>(exit: Exit.Exit<unknown, E>): Option.Option<E> =>
  Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
