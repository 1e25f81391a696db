/**
 * The driver of the shared breaker vectors (packages/contract/vectors/breaker.json; README.md there), run by both
 * editions: each vector runs one `CircuitBreaker.make` under the TestClock, its calls in fibers of their own. A
 * vector that passes in one edition and fails in the other is a bug of that edition.
 */
import {
  failureOption,
  fork,
  isInterruptedOnly,
  type Json,
  load,
  type Outcome,
  pollFiber,
  scoped,
  settle,
  type Step,
  TestClock,
  type Vector
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option } from "effect"
import { Backoff, CircuitBreaker, Failure } from "effect-resilience"

type Fields = { readonly [field: string]: Json }
const fields = (json: Json | undefined): Fields => (json ?? {}) as Fields

const tripOf = (spec: Fields): CircuitBreaker.TripPolicy => {
  if (spec.consecutive !== undefined) return CircuitBreaker.consecutive(spec.consecutive as number)
  const rate = fields(spec.failureRate)
  const window = fields(rate.window)
  const slow = rate.slowCall === undefined ? undefined : fields(rate.slowCall)
  return CircuitBreaker.failureRate({
    threshold: rate.threshold as number,
    minimumCalls: rate.minimumCalls as number,
    window: window.calls !== undefined
      ? { calls: window.calls as number }
      : { duration: Duration.millis(window.duration as number), buckets: (window.buckets as number) ?? 10 },
    ...(slow === undefined ? {} : {
      slowCall: { duration: Duration.millis(slow.duration as number), rateThreshold: slow.rateThreshold as number }
    })
  })
}

const openForOf = (spec: Json | undefined): CircuitBreaker.Options["openFor"] => {
  if (typeof spec === "number") return Duration.millis(spec)
  const bounds = fields(fields(spec).exponential)
  return Backoff.exponential({
    base: Duration.millis(bounds.base as number),
    cap: Duration.millis(bounds.cap as number)
  })
}

const optional = (policy: Fields, name: string, f: (n: number) => unknown) =>
  policy[name] === undefined ? {} : { [name]: f(policy[name] as number) }

const work = (outcome: Json | undefined): Effect.Effect<string, unknown> => {
  switch (outcome) {
    case "success":
      return Effect.succeed("ok")
    case "failure":
      return Effect.fail("down")
    case "fatal":
      return Effect.fail(Failure.fatal("bad request"))
    case "ignored":
      return Effect.fail("ignored")
    default:
      throw new Error(`no breaker outcome ${String(outcome)}`)
  }
}

/** A value as the vectors write it: durations as milliseconds, errors as their own fields, the stack left out. */
const plain = (value: unknown): unknown => {
  if (Duration.isDuration(value)) return Duration.toMillis(value)
  if (typeof value !== "object" || value === null) return value
  const out: Record<string, unknown> = {}
  for (const key of Object.getOwnPropertyNames(value)) {
    if (key !== "stack") out[key] = plain((value as Record<string, unknown>)[key])
  }
  return out
}

const exitOf = (exit: Exit.Exit<unknown, unknown> | undefined): unknown => {
  if (exit === undefined) return "pending"
  if (Exit.isSuccess(exit)) return { succeed: plain(exit.value) }
  if (isInterruptedOnly(exit.cause)) return "interrupted"
  const error = failureOption(exit.cause)
  return Option.isSome(error) ? { fail: plain(error.value) } : { die: String(Cause.squash(exit.cause)) }
}

interface Call {
  readonly fiber: Fiber.Fiber<unknown, unknown>
  ran: boolean
}

const run = (vector: Vector) =>
  Effect.gen(function*() {
    if (vector.startAt !== undefined) yield* TestClock.setTime(vector.startAt)
    const policy = vector.policy
    const transitions: Array<CircuitBreaker.Transition> = []
    const breaker = yield* CircuitBreaker.make({
      trip: tripOf(fields(policy.trip)),
      openFor: openForOf(policy.openFor),
      ...optional(policy, "halfOpenPermits", (n) => n),
      ...optional(policy, "halfOpenTimeout", Duration.millis),
      ...optional(policy, "halfOpenFailureRate", (n) => n),
      isIgnored: (error) => error === "ignored",
      onTransition: (t) => Effect.sync(() => transitions.push(t))
    })
    const calls = new Map<string, Call>()
    for (const step of vector.steps as ReadonlyArray<Step & Record<string, unknown>>) {
      if ("call" in step) {
        const call = { ran: false } as Call
        const takes = (step.takes as number | undefined) ?? 0
        const self = Effect.suspend(() => {
          call.ran = true
          const done = work(step.outcome as Json)
          return takes > 0 ? Effect.andThen(Effect.sleep(Duration.millis(takes)), done) : done
        })
        Object.assign(call, { fiber: yield* fork(breaker.protect(self)) })
        calls.set(step.call as string, call)
      } else if ("advance" in step) {
        yield* TestClock.adjust(Duration.millis(step.advance as number))
      } else if ("interrupt" in step) {
        yield* Fiber.interrupt(calls.get(step.interrupt as string)!.fiber)
      } else if ("expect" in step) {
        for (const [name, wanted] of Object.entries(step.expect as Record<string, Outcome>)) {
          const call = calls.get(name)
          if (call === undefined) throw new Error(`no call ${name}`)
          const actual: Record<string, unknown> = {}
          if (wanted.exit !== undefined) actual.exit = exitOf(pollFiber(call.fiber))
          if (wanted.ran !== undefined) actual.ran = call.ran
          expect(actual, `call ${name}`).toMatchObject(wanted)
        }
      } else if ("expectState" in step) {
        const state = { state: yield* breaker.state, openings: (yield* breaker.snapshot).openings, transitions }
        expect(state).toMatchObject(step.expectState as object)
      }
      yield* settle
    }
  })

describe("vectors: breaker", () => {
  for (const vector of load("breaker").vectors) scoped(vector.name, () => run(vector))
})
