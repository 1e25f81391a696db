import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Schedule } from "effect"
import { TestClock } from "effect/testing"
import { Failure, Retry } from "../src/index.js"

// Effect 4 only: its schedules are step functions (Schedule.fromStep / toStep), made when a schedule first runs;
// the shared contract (test/contract/Retry.test.ts) has the rest of Retry.retry's behaviour.

const scripted = <E>(failures: ReadonlyArray<E>) => {
  const instants: Array<number> = []
  const effect = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const i = instants.push(now) - 1
    return i < failures.length ? Effect.fail(failures[i]!) : Effect.succeed(`ok after ${i + 1}`)
  })
  return { effect, instants }
}

const ok = <A>(a: A): Effect.Effect<A, Failure.Retryable<string>> => Effect.succeed(a)

const runFor = <A, E>(effect: Effect.Effect<A, E>, time: Duration.Input) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    yield* TestClock.adjust(time)
    return yield* Fiber.await(fiber)
  })

describe("Retry.retry on Effect 4's schedules", () => {
  it.effect("the success path never starts the schedule (Schedule.toStep runs only after a failure)", () =>
    Effect.gen(function*() {
      let started = 0
      const counting = Schedule.fromStep(Effect.sync(() => {
        started++
        return (_now: number, _input: unknown) =>
          Effect.succeed([Duration.millis(10), Duration.millis(10)] as [Duration.Duration, Duration.Duration])
      }))
      const policy = Retry.retry({ schedule: counting, maxAttempts: 3 })
      yield* policy(ok(1))
      yield* policy(ok(2))
      expect(started).toBe(0)
      const { effect } = scripted([Failure.retryable("a"), Failure.retryable("b")])
      expect(yield* runFor(policy(effect), "1 second")).toEqual(Exit.succeed("ok after 3"))
      expect(started).toBe(1)
    }))
})
