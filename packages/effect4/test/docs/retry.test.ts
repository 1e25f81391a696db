import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Backoff, Deadline, Failure, Retry, RetryBudget } from "effect-resilience"
import { TestClock } from "effect/testing"

class HttpError {
  readonly _tag = "HttpError"
  constructor(readonly status: number) {}
}

// built once, where the client is built: every call through `retry` draws from this one budget
const budget = RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0.1 })

const retry = Retry.retry({
  schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }),
  maxAttempts: 4,
  budget
})

describe("a retry budget shared by every call", () => {
  it.effect("lets 8 calls to a dead service make 11 attempts, not 32", () =>
    Effect.gen(function*() {
      let attempts = 0
      const placeOrder = Effect.suspend(() => {
        attempts++
        return Effect.fail(new HttpError(503)) // the service is down
      })

      const call = placeOrder.pipe(
        Deadline.timeout("500 millis"), // each attempt
        Failure.retryWhen((e) => e._tag === "AttemptTimeout" || (e._tag === "HttpError" && e.status >= 502)),
        retry,
        Deadline.within("3 seconds"), // the whole call, retries included
        Effect.flip
      )

      const fiber = yield* Effect.forkChild(Effect.forEach([1, 2, 3, 4, 5, 6, 7, 8], () => call))
      yield* TestClock.adjust("1 minute") // time for every backoff
      const failures = yield* Fiber.join(fiber)

      // the first call spends 4 attempts (10 tokens -> 6); then every retry is refused: 6 -> 5 is not
      // more than half of 10, so each later call makes its one attempt and gives up
      expect(attempts).toBe(11)
      expect(failures.map((e) => e._tag === "RetriesExhausted" && `${e.attempts}:${e.reason}`)).toEqual([
        "4:attempts",
        ...Array(7).fill("1:budget")
      ])
      expect(yield* budget.tokens).toBe(0)
    }))
})
