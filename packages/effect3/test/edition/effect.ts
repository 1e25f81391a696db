import { it } from "@effect/vitest"
import {
  Cause,
  Clock,
  Context,
  Duration,
  Effect,
  Exit,
  FastCheck,
  Fiber,
  Logger,
  Metric,
  Option,
  Random,
  Schedule,
  Scope,
  TestClock as TC
} from "effect"
import { readFileSync } from "node:fs"

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

/** The typed failure of an exit, if any (Effect 4: `Cause.findErrorOption`). */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

/** Lets forked fibers run until they block: 20 yields (Effect 4: `Effect.repeat(Effect.yieldNow, { times: 20 })`). */
export const settle: Effect.Effect<void> = Effect.repeatN(Effect.yieldNow(), 20)

/** The first typed failure of a cause, if any (Effect 4: `Cause.findErrorOption`). */
export const failureOption = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.failureOption(cause)

/** Whether a cause holds only interruptions (Effect 4: `Cause.hasInterruptsOnly`). */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.isInterruptedOnly(cause)

/** A fiber's exit if it has ended, without waiting (Effect 4: `fiber.pollUnsafe()`). */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Exit.Exit<A, E> | undefined =>
  (fiber as Fiber.RuntimeFiber<A, E>).unsafePoll() ?? undefined

/** A class-style service key: `class A extends ServiceKey<A, Shape>()("A") {}` (Effect 4: `Context.Service`). */
export const ServiceKey = <Self, Shape>() => <const Key extends string>(key: Key) => Context.Tag(key)<Self, Shape>()

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

/** Every metric series now: its name and labels (Effect 4: `Metric.snapshot`'s `id` and `attributes`). */
export const metricSeries: Effect.Effect<
  ReadonlyArray<{ readonly name: string; readonly attributes: Readonly<Record<string, string>> }>
> = Effect.map(
  Metric.snapshot,
  (pairs) =>
    pairs.map((p) => ({
      name: p.metricKey.name,
      attributes: Object.fromEntries(p.metricKey.tags.map((t) => [t.key, t.value]))
    }))
)

/** A logger layer that keeps every line as `LEVEL message` (Effect 4: `Logger.layer`, `logLevel.toUpperCase()`). */
export const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    lines.push(`${logLevel.label} ${text}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** `schedule`, ending after `times` recurrences, with its own delays (Effect 4: `Schedule.max` with `recurs`). */
export const recursAtMost = <In, R>(schedule: Schedule.Schedule<Duration.Duration, In, R>, times: number) =>
  schedule.pipe(Schedule.intersect(Schedule.recurs(times)), Schedule.map(([d]) => d))

/** Runs `f` at every step of a schedule (Effect 3: `Schedule.tapOutput`; Effect 4: `Schedule.tap`). */
export const tapSchedule =
  <X, R2>(f: () => Effect.Effect<X, never, R2>) =>
  <Out, In, R>(self: Schedule.Schedule<Out, In, R>): Schedule.Schedule<Out, In, R | R2> =>
    Schedule.tapOutput(self, () => f())

/** fast-check (Effect 3: `FastCheck` from "effect"; Effect 4: the `fast-check` package). */
export { FastCheck as fc } from "effect"

/** A synchronous property over fast-check arbitraries (Effect 3: `it.prop`; Effect 4's `it.prop` takes Schemas). */
export const prop = <const T extends ReadonlyArray<unknown>>(
  name: string,
  arbitraries: { readonly [K in keyof T]: FastCheck.Arbitrary<T[K]> },
  body: (values: T) => void,
  options?: { readonly fastCheck?: FastCheck.Parameters<[T]> }
) => it.prop(name, arbitraries as never, body as never, options as never)

/** The error of an invalid argument (Effect 4: `Cause.IllegalArgumentError`). */
export const IllegalArgumentError = Cause.IllegalArgumentException

/** Starts `self` in a fiber of the global scope (Effect 4: `Effect.forkDetach`). */
export const forkDaemon = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> =>
  Effect.forkDaemon(self)

/** `it.live` with a `Scope` (Effect 3: `it.scopedLive`; Effect 4's `it.live` provides one). */
export const scopedLive = it.scopedLive

/** Handles every failure, defects and interruptions included (Effect 4: `Effect.catchCause`). */
export const catchAllCause =
  <E, A2, E2, R2>(f: (cause: Cause.Cause<E>) => Effect.Effect<A2, E2, R2>) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A | A2, E2, R | R2> => Effect.catchAllCause(self, f)

/**
 * Starts `self` in a fiber of `scope` (Effect 3: `Effect.forkIn`; Effect 4: with `startImmediately`, running it at
 * once up to its first suspension, as Effect 4's TestClock does not wait for a fiber forked just before it moves).
 */
export const forkIn = <A, E, R>(self: Effect.Effect<A, E, R>, scope: Scope.Scope) => Effect.forkIn(self, scope)

/** The text of a file of this edition's package, by its path from the package's folder (e.g. "src/Retry.ts"). */
export const editionFile = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

/** A `Clock` whose time is `now()` and whose sleeps are `sleep`'s (Effect 4's names its members differently). */
export const makeClock = (now: () => number, sleep: (duration: Duration.Duration) => Effect.Effect<void>) => {
  const nanos = () => BigInt(now()) * BigInt(1_000_000)
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: now,
    currentTimeMillis: Effect.sync(now),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep
  }
  return clock
}

/** Runs `self` with `clock` as its `Clock` (Effect 4: `Effect.provideService(self, Clock.Clock, clock)`). */
export const withClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.withClock(self, clock)

/** An effect that `register` resumes from a callback (Effect 4: `Effect.callback`, resuming inside `resume`). */
export const callback = <A, E = never>(
  register: (resume: (effect: Effect.Effect<A, E>) => void) => void | Effect.Effect<void>
): Effect.Effect<A, E> => Effect.async<A, E>((resume) => register(resume))

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

/**
 * An effectful property: each sample runs on a fresh TestClock in a scope of its own (Effect 3: `it.scoped.prop`;
 * Effect 4: the test/support/effectProp.ts shim over fast-check).
 */
export const effectProp = <const T extends Record<string, unknown>>(
  name: string,
  arbitraries: { readonly [K in keyof T]: FastCheck.Arbitrary<T[K]> },
  body: (values: T) => Effect.Effect<unknown, unknown, Scope.Scope>,
  options?: { readonly fastCheck?: FastCheck.Parameters<[T]>; readonly timeout?: number }
) =>
  it.scoped.prop(
    name,
    arbitraries as { readonly [K in keyof T]: FastCheck.Arbitrary<T[K]> },
    (values) => body(values as unknown as T),
    {
      timeout: options?.timeout ?? 30_000,
      ...(options?.fastCheck === undefined ? {} : { fastCheck: options.fastCheck as never })
    }
  )

/** Waits until `condition` holds, checking every `every` of real time, for at most `within` (test/support). */
export { eventually } from "../support/eventually.js"

/**
 * Waits until `n` fibers sleep on the TestClock until `wakeAt` (Effect 3: `TestClock.sleeps()`; Effect 4 counts
 * them in a test run by {@link itRecording}).
 */
export { untilSleeping } from "../support/eventually.js"

/** `it.effect` with a scope, whose TestClock sleeps {@link untilSleeping} can count (Effect 3: `it.scoped`). */
export const itRecording = <A, E>(name: string, body: () => Effect.Effect<A, E, Scope.Scope>, timeout?: number) =>
  it.scoped(name, body, timeout)

/** A service key (Effect 4: `Context.Service<I, S>(key)`). */
export const Tag = <I, S = I>(key: string): Context.Tag<I, S> => Context.GenericTag<I, S>(key)

/** Provides `scope` to `self` without closing it (Effect 4: `Scope.provide`). */
export const provideScope = (scope: Scope.Scope) => <A, E, R>(self: Effect.Effect<A, E, R>) => Scope.extend(self, scope)

/** Runs `self` on `clock` (Effect 4: `Effect.provideService(self, Clock.Clock, clock)`). */
export const provideClock = (clock: Clock.Clock) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.withClock(self, clock)

/** The error the library throws for bad options (Effect 4: `Cause.IllegalArgumentError`). */
export const IllegalArgument = Cause.IllegalArgumentException

/** Whether the exit was interrupted and nothing else (Effect 4: `Cause.hasInterruptsOnly`). */
export const interruptedOnlyOf = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)

/** The exit's first typed failure, if any (Effect 4: `Cause.findErrorOption`). */
export const errorOf = <E>(exit: Exit.Exit<unknown, E>): Option.Option<E> =>
  Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
