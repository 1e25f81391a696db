import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Backoff, CircuitBreaker, ResilientHttpClient, RetryBudget } from "effect-resilience"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"

// the policies that keep state, made once: sharing one is passing the same value twice
const makePolicies = Effect.gen(function*() {
  const breakers = yield* CircuitBreaker.keyed<string>({ trip: CircuitBreaker.consecutive(3), openFor: "30 seconds" })
  const budget = RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0.1 })
  return { breakers, budget }
})

// your own client: the combinators you want, read from the transport out
const resilient =
  ({ breakers, budget }: Effect.Success<typeof makePolicies>) => <E, R>(client: HttpClient.HttpClient.With<E, R>) =>
    client.pipe(
      ResilientHttpClient.classifyTransportErrors,
      ResilientHttpClient.deadlineHeader(),
      ResilientHttpClient.attemptTimeout("2 seconds"),
      ResilientHttpClient.circuitBreaker(breakers),
      ResilientHttpClient.retry({ schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" }), budget }),
      ResilientHttpClient.idempotencyKeys()
    )

// stands in for an origin that answers every request with a 503 (without a body: a web Response's body is read
// through promises, which the TestClock does not wait for)
let sent = 0
const unavailable = HttpClient.make((request) =>
  Effect.sync(() => {
    sent++
    return HttpClientResponse.fromWeb(request, new Response(null, { status: 503 }))
  })
)

describe("composing the client from its combinators", () => {
  it.effect("two clients share one breaker per origin, which the caller can read and reset", () =>
    Effect.gen(function*() {
      const policies = yield* makePolicies
      const reads = unavailable.pipe(resilient(policies))
      const writes = unavailable.pipe(resilient(policies), HttpClient.filterStatusOk)

      // three 503s through one client open the origin's breaker: the other client is refused without sending
      const first = yield* Effect.forkChild(Effect.flip(reads.get("http://prices.example/quote")))
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.join(first))._tag).toBe("RetriesExhausted")
      expect(sent).toBe(3)
      const refused = yield* Effect.flip(writes.execute(HttpClientRequest.post("http://prices.example/orders")))
      expect(refused._tag).toBe("CircuitOpen")
      expect(sent).toBe(3)

      const breaker = yield* policies.breakers.get("http://prices.example")
      expect(yield* breaker.state).toBe("open")
      yield* breaker.reset
      expect(yield* breaker.state).toBe("closed")
    }))
})
