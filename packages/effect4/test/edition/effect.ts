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

// what the helpers below import (kept beside them)
import { Context, Logger } from "effect"
import type { Option, Scope } from "effect"
import { recordingSleeps } from "../support/sleeps.js"

/** Lets forked fibers run until they block: 20 yields (Effect 3: `Effect.repeatN(Effect.yieldNow(), 20)`). */
export const settle: Effect.Effect<void> = Effect.repeat(Effect.yieldNow, { times: 20 })

/** The first typed failure of a cause, if any (Effect 3: `Cause.failureOption`). */
export const failureOption = <E>(cause: Cause.Cause<E>): Option.Option<E> => Cause.findErrorOption(cause)

/** Whether a cause holds only interruptions (Effect 3: `Cause.isInterruptedOnly`). */
export const isInterruptedOnly = (cause: Cause.Cause<unknown>): boolean => Cause.hasInterruptsOnly(cause)

/** What bad options throw (Effect 3: `Cause.IllegalArgumentException`). */
export const IllegalArgument = Cause.IllegalArgumentError

/** A fiber's exit if it has ended, without waiting (Effect 3: `fiber.unsafePoll()`, `null` while it runs). */
export const pollFiber = <A, E>(fiber: Fiber.Fiber<A, E>): Exit.Exit<A, E> | undefined => fiber.pollUnsafe()

/** A class-style service key: `class A extends ServiceKey<A, Shape>()("A") {}` (Effect 3: `Context.Tag`). */
export const ServiceKey = <Self, Shape>() => <const Key extends string>(key: Key) => Context.Service<Self, Shape>()(key)

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
