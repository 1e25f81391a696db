import { it } from "@effect/vitest"
import type { Clock } from "effect"
import {
  Cause,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  Metric,
  Option,
  Random,
  Schedule,
  Scope,
  TestClock as TC
} from "effect"

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

/** The fiber `fork` returns (Effect 4: `Fiber.Fiber`). */
export type Forked<A, E = never> = Fiber.RuntimeFiber<A, E>

/** The fiber's exit if it has ended, else `undefined` (Effect 4: `fiber.pollUnsafe()`). */
export const pollUnsafe = <A, E>(fiber: Forked<A, E>): Exit.Exit<A, E> | undefined => fiber.unsafePoll() ?? undefined

/** Yields to the other fibers once (Effect 4: `Effect.yieldNow`, a value). */
export const yieldNow: Effect.Effect<void> = Effect.yieldNow()

/** Runs `self` with a `Random` whose every draw is `draw()` (Effect 4: a `Random` of `nextDoubleUnsafe: draw`). */
export const withRandomDraw = (draw: () => number) => <A, E, R>(self: Effect.Effect<A, E, R>) => {
  const int = () => Math.floor(draw() * Number.MAX_SAFE_INTEGER)
  const random: Random.Random = {
    [Random.RandomTypeId]: Random.RandomTypeId,
    next: Effect.sync(draw),
    nextBoolean: Effect.sync(() => draw() < 0.5),
    nextInt: Effect.sync(int),
    nextRange: (min, max) => Effect.sync(() => min + draw() * (max - min)),
    nextIntBetween: (min, max) => Effect.sync(() => min + Math.floor(draw() * (max - min))),
    shuffle: (elements) => Random.make(0).shuffle(elements)
  }
  return Effect.withRandom(self, random)
}

/** Runs `self` with a `Random` seeded with `seed` (Effect 4: `Random.withSeed`). */
export const withSeed = (seed: string | number) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.withRandom(self, Random.make(seed))

/** A gauge's value for one set of labels (Effect 4: `Metric.withAttributes` then `Metric.value`). */
export const gaugeValue = (
  gauge: Metric.Metric.Gauge<number>,
  attributes: Record<string, string> = {}
): Effect.Effect<number> =>
  Effect.map(
    Metric.value(Object.entries(attributes).reduce((m, [k, v]) => Metric.tagged(m, k, v), gauge)),
    (state) => Number(state.value)
  )

/** A service key (Effect 4: `Context.Service<I, S>(key)`). */
export const Tag = <I, S = I>(key: string): Context.Tag<I, S> => Context.GenericTag<I, S>(key)

/** Provides `scope` to `self` without closing it (Effect 4: `Scope.provide`). */
export const provideScope = (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>) => Scope.extend(self, scope)

/** Runs `self` on `clock` (Effect 4: `Effect.provideService(self, Clock.Clock, clock)`). */
export const provideClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.withClock(self, clock)

/** Virtual time moved by hand (`advance`, `stepWall`; test/support/handClock.ts, one per edition). */
export { handClock } from "../support/handClock.js"

/** fast-check (Effect 4 no longer ships it: fast-check 4; Effect 3: `FastCheck` from "effect", fast-check 3). */
export { FastCheck as fc } from "effect"

/** A synchronous property over fast-check arbitraries, `prop(name, [arbitraries], ([values]) => …)` (Effect 4: test/support/prop.ts). */
export const prop = it.prop

/** The error the library throws for bad options (Effect 4: `Cause.IllegalArgumentError`). */
export const IllegalArgument = Cause.IllegalArgumentException

/** Whether the exit was interrupted and nothing else (Effect 4: `Cause.hasInterruptsOnly`). */
export const interruptedOnlyOf = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)

/** The exit's first typed failure, if any (Effect 4: `Cause.findErrorOption`). */
export const errorOf = <E>(exit: Exit.Exit<unknown, E>): Option.Option<E> =>
  Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
