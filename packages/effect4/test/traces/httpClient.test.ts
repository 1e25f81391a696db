/**
 * Issue 33's traces of the HTTP client (Effect 4 only): one `ResilientHttpClient.request` span per logical
 * request, one `ResilientHttpClient.attempt` child per attempt with the transport's span under it, the resend
 * count and `error.type` on the attempts, and the retry's decisions as events of the request's span.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schedule, Tracer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { TestClock } from "effect/testing"
import { CircuitBreaker, Deadline, ResilientHttpClient, RetryBudget } from "../../src/index.js"
import { backend, childrenOf, eventsOf, named, recorder, runTimed } from "./support.js"

describe("ResilientHttpClient traces", () => {
  it.effect("a retried request: one request span, one attempt span per attempt, the backoffs as events", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const client = yield* ResilientHttpClient.make({
        name: "traces",
        retry: { schedule: Schedule.spaced("200 millis"), maxAttempts: 3 }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([503, 503, 200])))
      const response = yield* runTimed(
        client.execute(HttpClientRequest.get("http://a.test/x")).pipe(
          Deadline.within("5 seconds"),
          Effect.withTracer(recorded.tracer)
        )
      )
      expect(response.status).toBe(200)

      const [request, ...others] = named(recorded, "ResilientHttpClient.request")
      expect(others).toHaveLength(0)
      expect(request!.parent._tag).toBe("None")
      expect(Object.fromEntries(request!.attributes)).toMatchObject({
        "http.request.method": "GET",
        client: "traces",
        origin: "http://a.test",
        "http.response.status_code": 200
      })
      expect(request!.attributes.has("error.type")).toBe(false)

      const attempts = childrenOf(recorded, request!)
      expect(attempts.map((s) => s.name)).toEqual(Array(3).fill("ResilientHttpClient.attempt"))
      expect(attempts.map((s) => s.attributes.get("http.request.resend_count"))).toEqual([undefined, 1, 2])
      expect(attempts.map((s) => s.attributes.get("error.type"))).toEqual(["503", "503", undefined])
      expect(attempts.map((s) => s.attributes.get("http.response.status_code"))).toEqual([503, 503, 200])
      // the deadline left when each attempt started: 5 s, less 50 ms per attempt and 200 ms per backoff
      expect(attempts.map((s) => s.attributes.get("deadline.remaining_ms"))).toEqual([5000, 4750, 4500])
      // the transport's span (Effect's client span, named for the method) is the attempt's child
      for (const attempt of attempts) {
        expect(childrenOf(recorded, attempt).map((s) => [s.name, s.kind])).toEqual([["GET", "client"]])
      }
      expect(attempts.every((s) => s.status._tag === "Ended")).toBe(true)

      expect(eventsOf(request!)).toEqual([1, 2].map((attempt) => ({
        name: "Retry.backoff",
        attributes: {
          "retry.attempt": attempt,
          "retry.delay_ms": 200,
          "retry.delay_source": "schedule",
          "error.type": "503"
        }
      })))
    }))

  it.effect("Retry-After chooses the backoff, and a request that gives up says why with error.type", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const client = yield* ResilientHttpClient.make({
        retry: { schedule: Schedule.spaced("10 millis"), maxAttempts: 2 }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([429], { "retry-after": "3" })))
      const exit = yield* runTimed(
        Effect.exit(client.execute(HttpClientRequest.get("http://b.test/")).pipe(Effect.withTracer(recorded.tracer)))
      )
      expect(exit._tag).toBe("Failure")
      const [request] = named(recorded, "ResilientHttpClient.request")
      expect(request!.attributes.get("error.type")).toBe("RetriesExhausted")
      expect(request!.attributes.get("client")).toBe("default")
      expect(eventsOf(request!)).toEqual([
        {
          name: "Retry.backoff",
          attributes: {
            "retry.attempt": 1,
            "retry.delay_ms": 3000,
            "retry.delay_source": "retry-after",
            "error.type": "429"
          }
        },
        {
          name: "Retry.exhausted",
          attributes: { "retry.stop_reason": "attempts", "retry.attempts": 2, "error.type": "429" }
        }
      ])
      expect(childrenOf(recorded, request!).map((s) => s.attributes.get("error.type"))).toEqual(["429", "429"])
    }))

  it.effect("a 409 for a keyed request backs off as in-progress; the budget refusing is the give-up's reason", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const budget = yield* RetryBudget.make({ maxTokens: 6, tokenRatio: 0.1 })
      const client = yield* ResilientHttpClient.make({
        retry: { schedule: Schedule.spaced("10 millis"), maxAttempts: 5, budget }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([409], { "retry-after": "1" })))
      const exit = yield* runTimed(
        Effect.exit(
          client.execute(HttpClientRequest.post("http://c.test/orders", { headers: { "idempotency-key": "\"k\"" } }))
            .pipe(Effect.withTracer(recorded.tracer))
        )
      )
      expect(exit._tag).toBe("Failure")
      const [request] = named(recorded, "ResilientHttpClient.request")
      const events = eventsOf(request!)
      expect(events[0]).toEqual({
        name: "Retry.backoff",
        attributes: {
          "retry.attempt": 1,
          "retry.delay_ms": 1000,
          "retry.delay_source": "in-progress",
          "error.type": "409"
        }
      })
      expect(events.at(-1)).toEqual({
        name: "Retry.exhausted",
        attributes: { "retry.stop_reason": "budget", "retry.attempts": events.length, "error.type": "409" }
      })
    }))

  it.effect("the policies inside an attempt: the breaker's transition and its refusal are the attempts' events", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const client = yield* ResilientHttpClient.make({
        name: "traces-breaker",
        retry: { schedule: Schedule.spaced("10 millis"), maxAttempts: 3 },
        breaker: { name: "traces-origin", trip: CircuitBreaker.consecutive(1), openFor: "30 seconds" }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([503])))
      const exit = yield* runTimed(
        Effect.exit(client.execute(HttpClientRequest.get("http://e.test/")).pipe(Effect.withTracer(recorded.tracer)))
      )
      expect(exit._tag).toBe("Failure")
      const [request] = named(recorded, "ResilientHttpClient.request")
      const attempts = childrenOf(recorded, request!).filter((s) => s.name === "ResilientHttpClient.attempt")
      // the first attempt's 503 opened the breaker; the retry was refused without a send (and not retried)
      expect(attempts.map((s) => s.attributes.get("error.type"))).toEqual(["503", "CircuitOpen"])
      expect(attempts.map((s) => childrenOf(recorded, s).map((c) => c.name))).toEqual([["GET"], []])
      expect(request!.attributes.get("error.type")).toBe("CircuitOpen")
      expect(attempts.map((s) => eventsOf(s).map((e) => [e.name, e.attributes]))).toEqual([
        [["CircuitBreaker.transition", {
          breaker: "traces-origin",
          "circuit_breaker.from": "closed",
          "circuit_breaker.to": "open"
        }]],
        [["CircuitBreaker.rejected", { breaker: "traces-origin", "circuit_breaker.state": "open" }]]
      ])
    }).pipe(Effect.scoped))

  it.effect("a paused origin: a request that waits, and one whose deadline cannot wait, are events", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const client = yield* ResilientHttpClient.make({ retry: false, sharedBackpressure: true }).pipe(
        Effect.provideService(HttpClient.HttpClient, backend([429, 200], { ratelimit: "\"default\";r=0;t=2" }))
      )
      const get = client.execute(HttpClientRequest.get("http://f.test/")).pipe(Effect.withTracer(recorded.tracer))
      const first = yield* Effect.forkChild(get)
      yield* TestClock.adjust("50 millis")
      expect((yield* Fiber.join(first)).status).toBe(429) // the origin pauses for 2 s from now
      const refused = yield* Effect.exit(get.pipe(Deadline.within("1 second")))
      expect(refused._tag).toBe("Failure")
      const waiting = yield* Effect.forkChild(get)
      yield* TestClock.adjust("3 seconds")
      expect((yield* Fiber.join(waiting)).status).toBe(200)
      const requests = named(recorded, "ResilientHttpClient.request")
      expect(requests.map((r) => eventsOf(r))).toEqual([
        [],
        [{
          name: "ResilientHttpClient.origin_paused",
          attributes: { origin: "http://f.test", "pause.remaining_ms": 2000, "pause.refused": true }
        }],
        [{ name: "ResilientHttpClient.origin_paused", attributes: { origin: "http://f.test", "pause.wait_ms": 2000 } }]
      ])
      expect(requests[1]!.attributes.get("error.type")).toBeUndefined() // retry: false: no outcome attributes
    }))

  it.effect("a client without retry still makes the request span, the transport's under it", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const client = yield* ResilientHttpClient.make({ name: "plain", retry: false }).pipe(
        Effect.provideService(HttpClient.HttpClient, backend([200]))
      )
      yield* runTimed(client.execute(HttpClientRequest.get("http://d.test/")).pipe(Effect.withTracer(recorded.tracer)))
      const [request] = named(recorded, "ResilientHttpClient.request")
      expect(request!.attributes.get("client")).toBe("plain")
      expect(childrenOf(recorded, request!).map((s) => s.name)).toEqual(["GET"])
      expect(recorded.spans.some((s: Tracer.Span) => s.name === "ResilientHttpClient.attempt")).toBe(false)
    }))
})
