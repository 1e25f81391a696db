/**
 * The guards (breaker, throttle, limiter), Chaos, the options' checks and one lifetime for a client's state — over
 * scripted in-memory servers under the TestClock.
 */
import {
  connectMillis,
  failureOf,
  fork,
  HttpClient,
  HttpClientRequest,
  IllegalArgumentError,
  scoped,
  TestClock,
  withRandom,
  withSeed
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import {
  AdaptiveThrottle,
  CircuitBreaker,
  RateLimiter,
  RateLimiterStore,
  ResilientHttpClient,
  Retry,
  RetryBudget
} from "effect-resilience"
import * as Chaos from "effect-resilience/Chaos"
import * as ResilientHttpClientNode from "effect-resilience/ResilientHttpClient/Node"
import { fast, scripted, scriptedClient, statusOf } from "./support/memoryHttp.js"

const url = "http://api.test/orders"

describe("ResilientHttpClient: the circuit breaker", () => {
  scoped("a breaker per origin opens after failures and fails fast", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([500], {
        retry: false,
        breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" }
      })
      yield* http.execute(HttpClientRequest.get(url))
      yield* http.execute(HttpClientRequest.get(url))
      const third = yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
      expect(failureOf(third)).toBeInstanceOf(CircuitBreaker.CircuitOpen)
      expect(log).toHaveLength(2)
    }))

  scoped("429 answers do not open the breaker: a throttling server is not down", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([{ status: 429, headers: { "retry-after": "1" } }], {
        retry: false,
        breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" },
        sharedBackpressure: false // each call is sent at once (four refusals in a row would pause the origin)
      })
      for (let i = 0; i < 4; i++) {
        expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(429))
      }
      expect(log).toHaveLength(4)
    }))

  scoped(
    "a breaker opened by a 503 stays open for its Retry-After when that is longer than openFor",
    () =>
      Effect.gen(function*() {
        const { http, log } = yield* scripted([{ status: 503, headers: { "retry-after": "5" } }, 200], {
          retry: false,
          breaker: { trip: CircuitBreaker.consecutive(1), openFor: "1 second" }
        })
        yield* http.execute(HttpClientRequest.get(url))
        yield* TestClock.adjust("4 seconds")
        expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          CircuitBreaker.CircuitOpen
        )
        yield* TestClock.adjust("1 second")
        expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
        expect(log).toHaveLength(2)
      })
  )

  scoped("the client's breakers are the user's to read and control", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([200], {
        breaker: { trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }
      })
      yield* http.execute(HttpClientRequest.get(url))
      const breakers = Option.getOrThrow(http.breakers)
      expect(yield* breakers.keys).toEqual(["http://api.test"])
      const breaker = yield* breakers.get("http://api.test")
      yield* breaker.isolate
      expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
        CircuitBreaker.CircuitOpen
      )
      yield* breaker.reset
      expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
      expect(log).toHaveLength(2)
      const { http: none } = yield* scripted([200])
      expect(Option.isNone(none.breakers)).toBe(true)
    }))

  scoped("a ready keyed breaker is shared: what one client sees opens it for the other", () =>
    Effect.gen(function*() {
      const breakers = yield* CircuitBreaker.keyed<string>({
        trip: CircuitBreaker.consecutive(2),
        openFor: "1 minute"
      })
      const one = yield* scripted([503], { retry: false, breaker: breakers })
      const other = yield* scripted([200], { retry: false, breaker: breakers })
      yield* one.http.execute(HttpClientRequest.get(url))
      yield* one.http.execute(HttpClientRequest.get(url))
      // a breaker built with its own options still counts the 503 answers, and the answer is returned as it is
      expect(failureOf(yield* Effect.exit(other.http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
        CircuitBreaker.CircuitOpen
      )
      expect(other.log).toHaveLength(0)
      expect(Option.getOrThrow(other.http.breakers)).toBe(breakers)
    }))
})

describe("ResilientHttpClient: the other guards", () => {
  scoped(
    "with throttle, a server refusing everything gets fewer requests than the calls, and the rest fail locally",
    () =>
      Effect.gen(function*() {
        const { http, log } = yield* scripted([503], { retry: false, throttle: true })
        let local = 0
        for (let i = 0; i < 40; i++) {
          const failure = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))
          if (failure instanceof AdaptiveThrottle.LocallyRejected) local++
        }
        expect(local).toBeGreaterThan(20)
        expect(log.length + local).toBe(40)
        // the throttle draws from Random: a fixed seed, so the bound is met or missed for good
      }).pipe(withSeed("throttle"))
  )

  scoped("a client-side limiter paces attempts per origin", () =>
    Effect.gen(function*() {
      const rateLimiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const { http, log } = yield* scripted([200], { rateLimiter })
      yield* http.execute(HttpClientRequest.get(url))
      const second = yield* fork(http.execute(HttpClientRequest.get(url)))
      expect(log.map((s) => s.at)).toEqual([0])
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(second)
      expect(log.map((s) => s.at)).toEqual([0, 1000])
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))

  scoped("with Chaos losing responses, a keyed POST is retried and keeps its key", () =>
    Effect.gen(function*() {
      const { client, log } = yield* scriptedClient([200])
      const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 10 } }).pipe(
        Effect.provideService(HttpClient.HttpClient, Chaos.client({ lostResponse: { probability: 0.5 } })(client))
      )
      const call = yield* fork(statusOf(http.execute(HttpClientRequest.post(url))))
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      expect(log.length).toBeGreaterThan(1)
      expect(new Set(log.map((s) => s.headers["idempotency-key"])).size).toBe(1)
    }).pipe(withRandom([0.1, 0.9])))
})

describe("the options are checked when the client is made", () => {
  it("rejects invalid options when called, not when run", () => {
    const invalid = [
      { attemptTimeout: -1 },
      { retry: { maxAttempts: 0 } },
      { retry: { budget: { maxTokens: 0, tokenRatio: 0.1 } } },
      { breaker: { trip: CircuitBreaker.consecutive(1), openFor: -1 } },
      { rateLimiter: {} },
      { idempotencyKeys: { methods: "POST" } },
      { idempotencyKeys: { header: "" } },
      { deadlineHeader: "" },
      { sharedBackpressure: { threshold: 2 } },
      { sharedBackpressure: { maxPause: "soon" } }
    ] as unknown as ReadonlyArray<ResilientHttpClient.Options>
    for (const options of invalid) {
      expect(() => ResilientHttpClient.make(options), JSON.stringify(options)).toThrow(IllegalArgumentError)
      expect(() => ResilientHttpClient.layer(options)).toThrow(IllegalArgumentError)
      expect(() => ResilientHttpClientNode.layer(options)).toThrow(IllegalArgumentError)
    }
    expect(() => ResilientHttpClientNode.layer(null as never)).toThrow(IllegalArgumentError)
    // the connect timeout is the Node transport's: given to `make`, which has no transport of its own, it is loud
    const connect = { connectTimeout: "1 second" } as ResilientHttpClient.Options
    expect(() => ResilientHttpClient.make(connect)).toThrow(/Node transport/)
    expect(() => ResilientHttpClient.circuitBreaker({} as never)).toThrow(IllegalArgumentError)
    expect(() => Chaos.client({ errorResponse: { probability: 0.1, status: 42 } })).toThrow(/status/)
    expect(() => Chaos.middleware({ lostResponse: { probability: 2 } })).toThrow(/probability/)
  })

  it("the Node layer refuses a bad connectTimeout with a message that names it (0 would be undici's none)", () => {
    for (const bad of [{ connectTimeout: -1 }, { connectTimeout: "soon" }, { connectTimeout: 0 }]) {
      const layer = () => ResilientHttpClientNode.layer(bad as unknown as ResilientHttpClientNode.NodeOptions)
      expect(layer, JSON.stringify(bad)).toThrow(IllegalArgumentError)
      expect(layer).toThrow(/connectTimeout/)
    }
  })

  it("connectTimeout to undici's milliseconds: an infinite one is undici's none (0), a tiny one never 0", () => {
    expect(connectMillis(undefined)).toBe(3000)
    expect(connectMillis("250 millis")).toBe(250)
    expect(connectMillis(0.2)).toBe(1) // never rounded down to 0, undici's "none"
    expect(connectMillis(Duration.infinity)).toBe(0)
    expect(connectMillis(Duration.days(30))).toBe(30 * 86_400_000)
  })
})

describe("one lifetime: a client's state is made when the client is built", () => {
  scoped(
    "one layer value provided twice builds two clients, each with its own budget and breakers",
    () =>
      Effect.gen(function*() {
        const { client, log } = yield* scriptedClient([503])
        const live = ResilientHttpClient.layer({
          retry: { schedule: fast, maxAttempts: 5, budget: { maxTokens: 4, tokenRatio: 0.1 } },
          breaker: { trip: CircuitBreaker.consecutive(3), openFor: "1 minute" }
        }).pipe(Layer.provide(Layer.succeed(HttpClient.HttpClient, client)))
        const once = Effect.gen(function*() {
          const http = yield* ResilientHttpClient.ResilientHttpClient
          return yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
        }).pipe(Effect.provide(live))
        for (let run = 0; run < 2; run++) {
          const call = yield* fork(once)
          yield* TestClock.adjust("10 seconds")
          const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<unknown>
          // a fresh budget (maxTokens 4) allows one retry, every time: the second run does not inherit the first's
          expect([error.attempts, error.reason]).toEqual([2, "budget"])
        }
        expect(log).toHaveLength(4)
      })
  )

  scoped("a ready budget is shared by whoever holds it", () =>
    Effect.gen(function*() {
      const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.1 })
      const one = yield* scripted([503], { retry: { schedule: fast, maxAttempts: 5, budget } })
      const other = yield* scripted([503], { retry: { schedule: fast, maxAttempts: 5, budget } })
      const first = yield* fork(Effect.exit(one.http.execute(HttpClientRequest.get(url))))
      yield* TestClock.adjust("10 seconds")
      expect((failureOf(yield* Fiber.join(first)) as Retry.RetriesExhausted<unknown>).attempts).toBe(2)
      const second = failureOf(yield* Effect.exit(other.http.execute(HttpClientRequest.get(url))))
      const exhausted = second as Retry.RetriesExhausted<unknown>
      expect([exhausted.attempts, exhausted.reason]).toEqual([1, "budget"])
    }))
})
