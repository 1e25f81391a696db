import { it } from "@effect/vitest"
import { Cause, Clock, Context, Duration, Effect, Exit, Logger, Metric, Option, Random, Schedule, Scope } from "effect"
import type { Fiber } from "effect"
import { TestClock as TC } from "effect/testing"
import { readFileSync } from "node:fs"

/** Which edition runs the suite (for the rare case whose expectation differs on purpose: say why where it is used). */
export const edition = "effect4" as "effect3" | "effect4"

/** What `Duration` functions accept (Effect 3: `DurationInput`). */
export type DurationInput = Duration.Input

/** `it.effect` with a `Scope` (Effect 3: `it.scoped`; Effect 4's `it.effect` provides one). */
export const scoped = it.effect

/** The TestClock: `adjust` and `setTime` (Effect 3: from "effect"; Effect 4: from "effect/testing"). */
export const TestClock = { adjust: TC.adjust, setTime: TC.setTime }

/**
 * Starts `self` in a child fiber (Effect 3: `Effect.fork`), at once up to its first suspension: Effect 4's
 * `TestClock.adjust` waits for the fibers it wakes, not for one forked just before (which would start sleeping after
 * the clock had moved on), where Effect 3's waits for every fiber of the test to suspend.
 */
export const fork = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.forkChild(self, { startImmediately: true })

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

/** The typed failure of an exit, if any (Effect 3: `Cause.failureOption`). */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined

// what the helpers below import (kept beside them)
import { recordingSleeps } from "../support/sleeps.js"

/** Lets forked fibers run until they block: 20 yields (Effect 3: `Effect.repeatN(Effect.yieldNow(), 20)`). */
export const settle: Effect.Effect<void> = Effect.repeat(Effect.yieldNow, { times: 20 })

/** The first typed failure of a cause, if any (Effect 3: `Cause.failureOption`). */
export const failureOption = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.findErrorOption(cause)

/** Whether a cause holds only interruptions (Effect 3: `Cause.isInterruptedOnly`). */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.hasInterruptsOnly(cause)

/** A fiber's exit if it has ended, without waiting (Effect 3: `fiber.unsafePoll()`, `null` while it runs). */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Exit.Exit<A, E> | undefined => fiber.pollUnsafe()

/** A class-style service key: `class A extends ServiceKey<A, Shape>()("A") {}` (Effect 3: `Context.Tag`). */
export const ServiceKey = <Self, Shape>() => <const Key extends string>(key: Key) => Context.Service<Self, Shape>()(key)

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

/** Every metric series now: its name and attributes (Effect 3: `Metric.snapshot`'s `metricKey`). */
export const metricSeries: Effect.Effect<
  ReadonlyArray<{ readonly name: string; readonly attributes: Readonly<Record<string, string>> }>
> = Effect.map(
  Metric.snapshot,
  (pairs) => pairs.map((p) => ({ name: p.id, attributes: { ...p.attributes } as Record<string, string> }))
)

/** A logger layer that keeps every line as `LEVEL message` (Effect 3: `Logger.replace`, `logLevel.label`). */
export const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    lines.push(`${logLevel.toUpperCase()} ${text}`)
  })
  return { lines, layer: Logger.layer([logger]) }
}

/** `schedule`, ending after `times` recurrences, with its own delays (Effect 3: `intersect` with `recurs`). */
export const recursAtMost = <In, E, R>(schedule: Schedule.Schedule<Duration.Duration, In, E, R>, times: number) =>
  Schedule.max([schedule, Schedule.recurs(times)])

/** Runs `f` at every step of a schedule (Effect 3: `Schedule.tapOutput`; Effect 4: `Schedule.tap`). */
export const tapSchedule =
  <X, R2>(f: () => Effect.Effect<X, never, R2>) =>
  <Out, In, E, R>(self: Schedule.Schedule<Out, In, E, R>): Schedule.Schedule<Out, In, E, R | R2> =>
    Schedule.tap(self, () => f())

/** fast-check (Effect 3: `FastCheck` from "effect"; Effect 4: the `fast-check` package). */
export * as fc from "fast-check"

/** A synchronous property over fast-check arbitraries (Effect 3: `it.prop`; Effect 4's `it.prop` takes Schemas). */
export { prop } from "../support/prop.js"

/** The error of an invalid argument (Effect 3: `Cause.IllegalArgumentException`). */
export const IllegalArgumentError = Cause.IllegalArgumentError

/** Starts `self` in a fiber of the global scope (Effect 3: `Effect.forkDaemon`). */
export const forkDaemon = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.forkDetach(self)

/** `it.live` with a `Scope` (Effect 3: `it.scopedLive`; Effect 4's `it.live` provides one). */
export const scopedLive = it.live

/** Handles every failure, defects and interruptions included (Effect 3: `Effect.catchAllCause`). */
export const catchAllCause =
  <E, A2, E2, R2>(f: (cause: Cause.Cause<E>) => Effect.Effect<A2, E2, R2>) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A | A2, E2, R | R2> => Effect.catchCause(self, f)

/**
 * Starts `self` in a fiber of `scope` (Effect 3: `Effect.forkIn`; Effect 4: with `startImmediately`, running it at
 * once up to its first suspension, as Effect 4's TestClock does not wait for a fiber forked just before it moves).
 */
export const forkIn = <A, E, R>(self: Effect.Effect<A, E, R>, scope: Scope.Scope) =>
  Effect.forkIn(self, scope, { startImmediately: true })

/** The text of a file of this edition's package, by its path from the package's folder (e.g. "src/Retry.ts"). */
export const editionFile = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

/** A `Clock` whose time is `now()` and whose sleeps are `sleep`'s (Effect 3's names its members differently). */
export const makeClock = (now: () => number, sleep: (duration: Duration.Duration) => Effect.Effect<void>) => {
  const nanos = () => BigInt(now()) * BigInt(1_000_000)
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: now,
    currentTimeMillis: Effect.sync(now),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep
  }
  return clock
}

/** Runs `self` with `clock` as its `Clock` (Effect 3: `Effect.withClock`). */
export const withClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.provideService(self, Clock.Clock, clock)

/** An effect that `register` resumes from a callback (Effect 3: `Effect.async`; Effect 4 resumes inside `resume`). */
export const callback = <A, E = never>(
  register: (resume: (effect: Effect.Effect<A, E>) => void) => void | Effect.Effect<void>
): Effect.Effect<A, E> => Effect.callback<A, E>((resume) => register(resume))

/** The fiber's Clock with its wall reading `millis` ahead; its monotonic reading and its sleeps are the Clock's. */
export const wallClockAhead = (millis: number): Effect.Effect<Clock.Clock> =>
  Effect.map(Effect.service(Clock.Clock), (test): Clock.Clock => {
    const aheadNanos = () => test.currentTimeNanosUnsafe() + BigInt(millis) * BigInt(1_000_000)
    return {
      currentTimeMillisUnsafe: () => test.currentTimeMillisUnsafe() + millis,
      currentTimeMillis: Effect.sync(() => test.currentTimeMillisUnsafe() + millis),
      currentTimeNanosUnsafe: aheadNanos,
      currentTimeNanos: Effect.sync(aheadNanos),
      monotonicTimeNanosUnsafe: () => test.monotonicTimeNanosUnsafe(),
      monotonicTimeNanos: test.monotonicTimeNanos,
      sleep: (d) => test.sleep(d)
    }
  })

/** Runs `self` with `attributes` on every metric it updates (Effect 3: `Effect.tagMetrics`). */
export const withMetricAttributes =
  (attributes: Record<string, string>) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.provideService(self, Metric.CurrentMetricAttributes, attributes)

/**
 * Runs `self` with its TestClock counting sleeps, for {@link forkUntilSleeping} (Effect 4's TestClock does not say
 * who sleeps until when; Effect 3's does, and there this is the identity).
 */
export { forkUntilSleeping, recordingSleeps } from "../support/sleeps.js"

/** Virtual time moved by hand (`advance`, `stepWall`, `reset`), for tests that move it thousands of times. */
export { handClock } from "../support/handClock.js"

/**
 * An effectful property: each sample runs on a fresh TestClock in a scope of its own (Effect 3: `it.scoped.prop`;
 * Effect 4: the test/support/effectProp.ts shim over fast-check).
 */
export { effectProp } from "../support/effectProp.js"

/** Waits until `condition` holds, checking every `every` of real time, for at most `within` (test/support). */
export { eventually } from "../support/eventually.js"

/**
 * Waits until `n` fibers sleep on the TestClock until `wakeAt` (Effect 3: `TestClock.sleeps()`; Effect 4 counts
 * them in a test run by {@link itRecording}).
 */
export { untilSleeping } from "../support/sleeps.js"

/** `it.effect` with a scope, whose TestClock sleeps {@link untilSleeping} can count (Effect 3: `it.scoped`). */
export const itRecording = <A, E>(name: string, body: () => Effect.Effect<A, E, Scope.Scope>, timeout?: number) =>
  it.effect(name, () => recordingSleeps(body()), timeout)

/** A service key (Effect 3: `Context.GenericTag<I, S>(key)`). */
export const Tag = <I, S = I>(key: string): Context.Service<I, S> => Context.Service<I, S>(key)

/** Provides `scope` to `self` without closing it (Effect 3: `Scope.extend`). */
export const provideScope = (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Scope.provide(self, scope)

/** Runs `self` on `clock` (Effect 3: `Effect.withClock`). */
export const provideClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.provideService(self, Clock.Clock, clock)

/** The error the library throws for bad options (Effect 3: `Cause.IllegalArgumentException`). */
export const IllegalArgument = Cause.IllegalArgumentError

/** Whether the exit was interrupted and nothing else (Effect 3: `Cause.isInterruptedOnly`). */
export const interruptedOnlyOf = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)

/** The exit's first typed failure, if any (Effect 3: `Cause.failureOption`). */
export const errorOf = <E>(exit: Exit.Exit<unknown, E>): Option.Option<E> =>
  Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
