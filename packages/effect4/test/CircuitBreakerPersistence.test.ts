import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Metric, Option, Stream } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { CircuitBreaker as Persisted } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as CircuitBreakerPersistence from "../src/CircuitBreaker/Persistence.js"
import { CircuitBreaker } from "../src/index.js"

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

/** A backend answering each request with `respond(n)` (n from 0), counting what reached it. */
const backend = (respond: (n: number) => Response | Effect.Effect<Response>) => {
  let served = 0
  const client = HttpClient.make((request) =>
    Effect.suspend(() => {
      const r = respond(served++)
      return Effect.map(Effect.isEffect(r) ? r : Effect.succeed(r), (res) => HttpClientResponse.fromWeb(request, res))
    })
  )
  return { client, served: () => served }
}

const status = (code: number, headers?: Record<string, string>) =>
  new Response(null, { status: code, ...headers && { headers } })

const get = <E, R>(client: HttpClient.HttpClient.With<E, R>, url = "http://partner.test/orders") =>
  Effect.exit(client.execute(HttpClientRequest.get(url)))

const reasonOf = (exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error) || !(error.value instanceof Persisted.CircuitBreakerError)) {
    throw new Error(`expected CircuitBreakerError, got ${Cause.pretty(exit.cause)}`)
  }
  return error.value.reason
}

const statusOf = (exit: Exit.Exit<HttpClientResponse.HttpClientResponse, unknown>) =>
  Exit.isSuccess(exit) ? exit.value.status : undefined

const options = { trip: CircuitBreaker.consecutive(2), openFor: "10 seconds" } as const

describe("CircuitBreaker/Persistence with HttpClient.withCircuitBreaker", () => {
  it.effect("transient statuses open our breaker of the request's origin; a refusal never reaches the client", () =>
    Effect.gen(function*() {
      const { client, served } = backend((n) => status(n < 2 ? 503 : 200))
      const breakers = yield* CircuitBreaker.keyed<string>(options)
      const breaker = yield* CircuitBreakerPersistence.fromKeyed(breakers)
      const guarded = client.pipe(HttpClient.withCircuitBreaker({ breaker }))
      expect(statusOf(yield* get(guarded))).toBe(503)
      expect(statusOf(yield* get(guarded))).toBe(503)
      expect(yield* breakers.keys).toEqual(["http://partner.test"])
      expect(yield* (yield* breakers.get("http://partner.test")).state).toBe("open")
      yield* TestClock.adjust("4 seconds")
      const reason = reasonOf(yield* get(guarded))
      expect(reason).toBeInstanceOf(Persisted.CircuitOpen)
      expect(reason).toMatchObject({ key: "http://partner.test" })
      expect(Duration.toMillis((reason as Persisted.CircuitOpen).retryAfter)).toBe(6_000)
      expect(served()).toBe(2)
      // another origin has a breaker of its own
      expect(statusOf(yield* get(guarded, "http://other.test/x"))).toBe(200)
      const state = yield* breaker.state("http://partner.test")
      expect(state._tag).toBe("Open")
      expect(state).toMatchObject({ consecutiveOpenings: 1 })
      yield* TestClock.adjust("6 seconds")
      expect(statusOf(yield* get(guarded))).toBe(200)
      expect(yield* breaker.state("http://partner.test")).toEqual({ _tag: "Closed", key: "http://partner.test" })
    }))

  it.effect("Effect's classifier decides: a 404 is a success, a 429 is ignored, whatever isFailure says", () =>
    Effect.gen(function*() {
      const codes = [503, 404, 503, 429, 503]
      const { client } = backend((n) => status(codes[n]!))
      const breaker = yield* CircuitBreakerPersistence.make({ ...options, isFailure: () => false })
      const guarded = client.pipe(HttpClient.withCircuitBreaker({ breaker, key: "partner" }))
      for (let i = 0; i < 4; i++) yield* get(guarded)
      // 503, 404 (resets the run), 503, 429 (ignored): one failure in a row
      expect((yield* breaker.state("partner"))._tag).toBe("Closed")
      yield* get(guarded)
      expect((yield* breaker.state("partner"))._tag).toBe("Open")
    }))

  it.effect("a 503's Retry-After keeps it open that long, capped at maxOpenDuration", () =>
    Effect.gen(function*() {
      const { client } = backend((n) => status(503, { "retry-after": n === 0 ? "60" : "7200" }))
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second",
        maxOpenDuration: "2 minutes"
      })
      const guarded = client.pipe(HttpClient.withCircuitBreaker({ breaker, key: "partner" }))
      yield* get(guarded)
      const first = yield* breaker.state("partner")
      expect(first._tag === "Open" && Duration.toMillis(first.retryAfter)).toBe(60_000)
      yield* TestClock.adjust("60 seconds")
      yield* get(guarded) // the trial fails, asking for two hours
      const second = yield* breaker.state("partner")
      expect(second._tag === "Open" && Duration.toMillis(second.retryAfter)).toBe(120_000)
    }))

  it.effect("half-open: a caller finding every permit taken gets CircuitHalfOpen, and state says probing", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { client, served } = backend((n) => n === 0 ? status(500) : Effect.as(Deferred.await(gate), status(200)))
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second"
      })
      const guarded = client.pipe(HttpClient.withCircuitBreaker({ breaker, key: "partner" }))
      yield* get(guarded)
      yield* TestClock.adjust("1 second")
      expect(yield* breaker.state("partner")).toEqual({
        _tag: "HalfOpen",
        key: "partner",
        probing: false,
        consecutiveOpenings: 1
      })
      const trial = yield* Effect.forkChild(get(guarded))
      yield* settle
      expect(yield* breaker.state("partner")).toMatchObject({ _tag: "HalfOpen", probing: true })
      expect(reasonOf(yield* get(guarded))).toBeInstanceOf(Persisted.CircuitHalfOpen)
      expect(served()).toBe(2)
      yield* Deferred.succeed(gate, undefined)
      expect(statusOf(yield* Fiber.join(trial))).toBe(200)
      expect((yield* breaker.state("partner"))._tag).toBe("Closed")
    }))

  it.effect("transitions: every key's, as Effect's type has them", () =>
    Effect.gen(function*() {
      const { client } = backend((n) => status(n === 0 ? 503 : 200))
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second"
      })
      const seen = yield* Effect.forkChild(Stream.runCollect(Stream.take(breaker.transitions, 3)))
      yield* settle
      const guarded = client.pipe(HttpClient.withCircuitBreaker({ breaker, key: "partner" }))
      yield* get(guarded)
      yield* TestClock.adjust("1 second")
      yield* get(guarded)
      const transitions = yield* Fiber.join(seen)
      expect(transitions).toEqual([
        { key: "partner", from: "Closed", to: "Open", retryAfter: Duration.seconds(1), consecutiveOpenings: 1 },
        { key: "partner", from: "Open", to: "HalfOpen" },
        { key: "partner", from: "HalfOpen", to: "Closed" }
      ])
    }))

  it.effect("execute without classify: failures count, interruptions do not; the call's own exit is kept", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(2),
        openFor: "1 second"
      })
      const fiber = yield* Effect.forkChild(breaker.execute(Effect.never, { key: "k" }))
      yield* settle
      yield* Fiber.interrupt(fiber)
      expect(yield* Effect.exit(breaker.execute(Effect.fail("down"), { key: "k" }))).toEqual(Exit.fail("down"))
      expect(yield* Effect.exit(breaker.execute(Effect.succeed(1), { key: "k" }))).toEqual(Exit.succeed(1))
      yield* Effect.exit(breaker.execute(Effect.fail("down"), { key: "k" }))
      expect((yield* breaker.state("k"))._tag).toBe("Closed")
      yield* Effect.exit(breaker.execute(Effect.fail("down"), { key: "k" }))
      expect((yield* breaker.state("k"))._tag).toBe("Open")
      // a key nobody called is closed, and asking builds no breaker for it
      expect(yield* breaker.state("never-called")).toEqual({ _tag: "Closed", key: "never-called" })
    }))

  it.effect("a classify that dies ignores the call and adds its defect to the call's cause", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second"
      })
      const exit = yield* Effect.exit(
        breaker.execute(Effect.fail("down"), { key: "k", classify: () => Effect.die("classifier bug") })
      )
      expect(Exit.isFailure(exit) && Cause.hasFails(exit.cause) && Cause.hasDies(exit.cause)).toBe(true)
      expect((yield* breaker.state("k"))._tag).toBe("Closed")
    }))

  it.effect("the bridge's calls are our breakers' metrics (Effect's own breaker has none)", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreakerPersistence.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second",
        name: "bridged"
      })
      yield* Effect.exit(breaker.execute(Effect.fail("down"), { key: "k" }))
      expect(reasonOf(yield* Effect.exit(breaker.execute(Effect.succeed(1), { key: "k" })))).toMatchObject({
        _tag: "CircuitOpen",
        key: "k"
      })
      const rejected = yield* Metric.value(
        Metric.withAttributes(CircuitBreaker.rejectionsTotal, { breaker: "bridged" })
      )
      const opened = yield* Metric.value(
        Metric.withAttributes(CircuitBreaker.transitionsTotal, { breaker: "bridged", from: "closed", to: "open" })
      )
      expect([rejected.count, opened.count]).toEqual([1, 1])
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))

  it("rejects a maxOpenDuration that is not positive", () => {
    expect(() => CircuitBreakerPersistence.make({ ...options, maxOpenDuration: 0 })).toThrow(Cause.IllegalArgumentError)
    expect(() => CircuitBreakerPersistence.make({ ...options, maxOpenDuration: -1 })).toThrow(
      Cause.IllegalArgumentError
    )
  })
})
