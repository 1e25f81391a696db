import {
  type DurationInput,
  forkUntilSleeping,
  HttpServerRequest,
  HttpServerResponse,
  IllegalArgument,
  jsonResponse,
  recordingSleeps,
  scoped,
  TestClock,
  withRandom
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Option } from "effect"
import {
  Deadline,
  DeadlineMiddleware,
  IdempotencyMiddleware,
  IdempotencyStore,
  RateLimiter,
  RateLimiterStore,
  RateLimitHeaders,
  RateLimitMiddleware
} from "effect-resilience"
import * as Chaos from "effect-resilience/Chaos"
import { serve } from "./support/memoryServer.js"

const hello = Effect.succeed(HttpServerResponse.text("hello"))

describe("RateLimitMiddleware", () => {
  scoped("every response carries RateLimit-Policy and RateLimit as Structured Fields", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 3, refillPerSecond: 1 })
      const send = yield* serve(hello.pipe(RateLimitMiddleware.make({ limiter, name: "api" })))
      const reply = yield* send()
      expect(reply.status).toBe(200)
      expect(RateLimitHeaders.parsePolicy(reply.headers["ratelimit-policy"]!)).toEqual(
        Option.some([{ name: "api", quota: 3, window: 3 }])
      )
      expect(RateLimitHeaders.parseRateLimit(reply.headers["ratelimit"]!)).toEqual(
        Option.some([{ name: "api", remaining: 2, reset: 1 }])
      )
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))

  scoped(
    "over the limit: 429 problem+json with Retry-After >= 1, and the handler does not run",
    () =>
      Effect.gen(function*() {
        let runs = 0
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 0.5 })
        const app = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`)).pipe(
          RateLimitMiddleware.make({ limiter })
        )
        const send = yield* serve(app)
        const replies = []
        for (let i = 0; i < 4; i++) replies.push(yield* send())
        expect(replies.map((r) => r.status)).toEqual([200, 200, 429, 429])
        const denied = replies[2]!
        expect(denied.headers["content-type"]).toBe("application/problem+json")
        expect(JSON.parse(denied.body).type).toBe(RateLimitMiddleware.quotaExceededType)
        expect(denied.headers["retry-after"]).toBe("2") // one token every 2 s
        // t: when more quota comes (draft 11), the moment Retry-After names — not the 4 s to refill the bucket
        expect(RateLimitHeaders.parseRateLimit(denied.headers["ratelimit"]!)).toEqual(
          Option.some([{ name: "default", remaining: 0, reset: 2 }])
        )
        expect(runs).toBe(2)
        yield* TestClock.adjust("2 seconds")
        expect((yield* send()).status).toBe(200)
      }).pipe(Effect.provide(RateLimiterStore.layerMemory))
  )

  scoped(
    "limits each client separately, by address: a header the client chooses changes nothing",
    () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 0.001 })
        const send = yield* serve(hello.pipe(RateLimitMiddleware.make({ limiter })))
        const statuses: Array<number> = []
        for (let i = 0; i < 6; i++) statuses.push((yield* send({ headers: { "x-api-key": `k${i}` } })).status)
        expect(statuses).toEqual([200, 200, 429, 429, 429, 429])
        // another client (another address) has its own quota, and cannot drain this one's by naming it
        const spoof = { "x-api-key": "127.0.0.1", "x-forwarded-for": "127.0.0.1" }
        expect((yield* send({ headers: spoof, from: "127.0.0.3" })).status).toBe(200)
        // no address at all: refused with a 500, never counted in a quota shared with others
        const anonymous = yield* send({ from: null })
        expect(anonymous.status).toBe(500)
        expect(JSON.parse(anonymous.body).type).toContain("client-identity-unavailable")
      }).pipe(Effect.provide(RateLimiterStore.layerMemory))
  )

  scoped("before idempotency, a 429 is never stored under the key", () =>
    Effect.gen(function*() {
      let runs = 0
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const idempotent = yield* IdempotencyMiddleware.make()
      const orders = Effect.sync(() => jsonResponse({ id: ++runs }, { status: 201 })).pipe(
        idempotent,
        RateLimitMiddleware.make({ limiter })
      )
      const send = yield* serve(orders)
      expect((yield* send({ key: "a" })).status).toBe(201)
      expect((yield* send({ key: "b" })).status).toBe(429)
      yield* TestClock.adjust("1 second")
      const retried = yield* send({ key: "b" })
      expect(retried.status).toBe(201)
      expect(retried.headers["idempotent-replayed"]).toBeUndefined()
      expect(runs).toBe(2)
    }).pipe(Effect.provide(Layer.merge(RateLimiterStore.layerMemory, IdempotencyStore.layerMemory))))
})

describe("DeadlineMiddleware", () => {
  const remainingApp = (options?: DeadlineMiddleware.Options) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      request.url === "/slow"
        ? Effect.as(Effect.sleep("10 seconds"), HttpServerResponse.text("late"))
        : Effect.map(Deadline.remaining, (r) =>
          HttpServerResponse.text(Option.match(r, {
            onNone: () => "none",
            onSome: (d) => String(Duration.toMillis(d))
          })))).pipe(DeadlineMiddleware.make(options))
  const withHeader = (path: string, header?: string) => ({
    path,
    ...(header === undefined ? {} : { headers: { "request-timeout-ms": header } })
  })

  scoped("runs the handler under the caller's budget, clamped to the server maximum", () =>
    Effect.gen(function*() {
      const send = yield* serve(remainingApp({ maxTimeout: "2 seconds" }))
      expect((yield* send(withHeader("/", "1500"))).body).toBe("1500")
      expect((yield* send(withHeader("/", "999999"))).body).toBe("2000")
      expect((yield* send(withHeader("/"))).body).toBe("none")
    }))

  scoped("a malformed header is ignored by default", () =>
    Effect.gen(function*() {
      const send = yield* serve(remainingApp({ defaultTimeout: "5 seconds" }))
      for (const bad of ["-1", "1.5", "abc", "1e3", ""]) expect((yield* send(withHeader("/", bad))).body).toBe("5000")
    }))

  scoped("onMalformed: reject answers 400", () =>
    Effect.gen(function*() {
      const send = yield* serve(remainingApp({ onMalformed: "reject" }))
      expect((yield* send(withHeader("/", "soon"))).status).toBe(400)
      expect((yield* send(withHeader("/", "10"))).status).toBe(200)
    }))

  scoped(
    "when the deadline passes the handler is interrupted and the answer is 504",
    () =>
      recordingSleeps(Effect.gen(function*() {
        const send = yield* serve(remainingApp())
        const now = yield* Clock.currentTimeMillis
        const reply = yield* forkUntilSleeping(send(withHeader("/slow", "1000")), now + 1000)
        yield* TestClock.adjust("1 second")
        const r = yield* Fiber.join(reply)
        expect(r.status).toBe(504)
        expect(JSON.parse(r.body).type).toContain("deadline-exceeded")
        expect((yield* send(withHeader("/slow", "0"))).status).toBe(504)
      }))
  )

  it("parses only non-negative integers", () => {
    expect(DeadlineMiddleware.parseHeader(" 250 ")).toBe(250)
    for (const bad of ["", "-1", "+1", "1.0", "0x10", "1".repeat(16), "١٢"]) {
      expect(DeadlineMiddleware.parseHeader(bad)).toBeUndefined()
    }
  })
})

describe("Chaos.middleware", () => {
  scoped("injects error responses with Retry-After without running the handler", () =>
    Effect.gen(function*() {
      let runs = 0
      const app = Effect.sync(() => HttpServerResponse.text(`ok ${++runs}`)).pipe(
        Chaos.middleware({ errorResponse: { probability: 0.5, status: 503, retryAfter: "1500 millis" } })
      )
      const send = yield* serve(app)
      const first = yield* send()
      const second = yield* send()
      expect(first.status).toBe(503) // draw 0.1 < 0.5
      expect(first.headers["retry-after"]).toBe("2")
      expect(second.status).toBe(200) // draw 0.9
      expect(runs).toBe(1)
    }).pipe(withRandom([0.1, 0.9])))

  scoped("adds latency on the Clock", () =>
    recordingSleeps(Effect.gen(function*() {
      const send = yield* serve(hello.pipe(Chaos.middleware({ latency: { probability: 1, delay: "3 seconds" } })))
      const now = yield* Clock.currentTimeMillis
      const reply = yield* forkUntilSleeping(send(), now + 3000)
      yield* TestClock.adjust("3 seconds")
      expect((yield* Fiber.join(reply)).status).toBe(200)
    })))

  it("rejects probabilities outside [0, 1] and bad statuses", () => {
    expect(() => Chaos.middleware({ lostResponse: { probability: 2 } })).toThrow(/probability/)
    expect(() => Chaos.client({ errorResponse: { probability: 0.1, status: 42 } })).toThrow(/status/)
  })
})

describe("middleware constructors", () => {
  scoped("validate their options when called, throwing the invalid-argument error", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const invalid: ReadonlyArray<() => unknown> = [
        () => DeadlineMiddleware.make({ maxTimeout: -1 }),
        () => DeadlineMiddleware.make({ defaultTimeout: "soon" as DurationInput }),
        () => DeadlineMiddleware.make({ header: "" }),
        () => DeadlineMiddleware.make({ onMalformed: "drop" as "reject" }),
        () => RateLimitMiddleware.make({ limiter: undefined as unknown as RateLimiter.RateLimiter }),
        () => RateLimitMiddleware.make({ limiter, name: "é" }),
        () => RateLimitMiddleware.make({ limiter, cost: 2 as unknown as () => number }),
        () => IdempotencyMiddleware.make({ maxBodyBytes: 0 }),
        () => IdempotencyMiddleware.make({ maxResponseBytes: -1 }),
        () => Chaos.client({ latency: { probability: 0.5, delay: -1 } })
      ]
      for (const build of invalid) expect(build).toThrow(IllegalArgument)
      // and valid options build without running anything
      expect(() => DeadlineMiddleware.make({ header: "X-Budget", onMalformed: "reject" })).not.toThrow()
      expect(() => RateLimitMiddleware.make({ limiter, cost: () => 2 })).not.toThrow()
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))
})
