import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Backoff, Failure, Retry } from "effect-resilience"
import { TestClock } from "effect/testing"

class Unavailable {
  readonly _tag = "Unavailable"
}

describe("a retried call", () => {
  it.effect("waits 100 ms, then 200 ms, between its attempts", () =>
    Effect.gen(function*() {
      let attempts = 0
      // fails twice, then answers
      const call = Effect.suspend(() => ++attempts < 3 ? Effect.fail(new Unavailable()) : Effect.succeed("ok"))

      const fiber = yield* call.pipe(
        Failure.retryWhen((e) => e._tag === "Unavailable"),
        Retry.retry({ schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" }), maxAttempts: 3 }),
        Effect.forkChild
      )

      // no real time passes: the test moves the clock
      yield* TestClock.adjust("99 millis")
      expect(attempts).toBe(1)
      yield* TestClock.adjust("1 millis")
      expect(attempts).toBe(2)
      yield* TestClock.adjust("199 millis")
      expect(attempts).toBe(2)
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toBe("ok")
      expect(attempts).toBe(3)
    }))
})
