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

// what the helpers below import (kept beside them)
import { Cause, Context, Logger } from "effect"
import type { FastCheck, Option, Scope } from "effect"

/** Lets forked fibers run until they block: 20 yields (Effect 4: `Effect.repeat(Effect.yieldNow, { times: 20 })`). */
export const settle: Effect.Effect<void> = Effect.repeatN(Effect.yieldNow(), 20)

/** The first typed failure of a cause, if any (Effect 4: `Cause.findErrorOption`). */
export const failureOption = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.failureOption(cause)

/** Whether a cause holds only interruptions (Effect 4: `Cause.hasInterruptsOnly`). */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.isInterruptedOnly(cause)

/** What bad options throw (Effect 4: `Cause.IllegalArgumentError`). */
export const IllegalArgument = Cause.IllegalArgumentException

/** A fiber's exit if it has ended, without waiting (Effect 4: `fiber.pollUnsafe()`). */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Exit.Exit<A, E> | undefined =>
  (fiber as Fiber.RuntimeFiber<A, E>).unsafePoll() ?? undefined

/** A class-style service key: `class A extends ServiceKey<A, Shape>()("A") {}` (Effect 4: `Context.Service`). */
export const ServiceKey = <Self, Shape>() => <const Key extends string>(key: Key) => Context.Tag(key)<Self, Shape>()

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
