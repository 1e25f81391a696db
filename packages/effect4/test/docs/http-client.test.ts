import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { Backoff, CircuitBreaker, Deadline, ResilientHttpClient } from "effect-resilience"
import { HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { TestClock } from "effect/testing"

// the client of the first example: its breaker, budget and pauses are made when the layer is built
const ClientLive = ResilientHttpClient.layer({
  attemptTimeout: "3 seconds",
  retry: {
    schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }),
    maxAttempts: 4,
    budget: { maxTokens: 10, tokenRatio: 0.1 }
  },
  breaker: {
    trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "30 seconds" } }),
    openFor: "10 seconds"
  }
})

const placeOrder = (sku: string) =>
  Effect.gen(function*() {
    const client = yield* ResilientHttpClient.ResilientHttpClient
    const response = yield* client.execute(
      HttpClientRequest.post("http://127.0.0.1:8080/orders").pipe(HttpClientRequest.bodyJsonUnsafe({ sku }))
    )
    return yield* response.json
  }).pipe(Deadline.within("10 seconds"))

// stands in for a server that is down: every connection is refused
let attempts = 0
const Down = Layer.succeed(
  HttpClient.HttpClient,
  HttpClient.make((request) =>
    Effect.suspend(() => {
      attempts++
      const cause = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })
      return Effect.fail(
        new HttpClientError.HttpClientError({ reason: new HttpClientError.TransportError({ request, cause }) })
      )
    })
  )
)

const skus = Array.from({ length: 30 }, (_, i) => `BOOK-${i}`)

const run = <A, E>(program: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    attempts = 0
    const fiber = yield* Effect.forkChild(program)
    yield* TestClock.adjust("10 minutes") // time for every backoff
    return yield* Fiber.join(fiber)
  })

describe("a client built once protects every call", () => {
  it.effect("30 orders to a server that is down: the budget and the breaker stop the attempts", () =>
    Effect.gen(function*() {
      // right: the layer is provided once, around the whole program
      const program = Effect.forEach(skus, (sku) => Effect.flip(placeOrder(sku))).pipe(
        Effect.provide(ClientLive),
        Effect.provide(Down)
      )
      const errors = yield* run(program)
      // the first order makes its 4 attempts; the budget then refuses every retry, and once 20 calls have
      // failed the breaker opens: the last 13 orders are refused without an attempt
      expect(attempts).toBe(20)
      expect(errors.filter((e) => e._tag === "RetriesExhausted" && e.reason === "budget")).toHaveLength(16)
      expect(errors.filter((e) => e._tag === "CircuitOpen")).toHaveLength(13)
    }))

  it.effect("provided around each call, it protects nothing: a fresh breaker and budget every time", () =>
    Effect.gen(function*() {
      // wrong: every call builds a client of its own
      const program = Effect.forEach(skus, (sku) => Effect.flip(placeOrder(sku).pipe(Effect.provide(ClientLive)))).pipe(
        Effect.provide(Down)
      )
      const errors = yield* run(program)
      expect(attempts).toBe(120)
      expect(errors.every((e) => e._tag === "RetriesExhausted" && e.reason === "attempts")).toBe(true)
    }))
})
