import { HttpClientRequest, HttpRouter, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Fiber, Layer, Option, Random, TestClock } from "effect"
import * as Chaos from "../src/Chaos.js"
import {
  Deadline,
  DeadlineMiddleware,
  IdempotencyMiddleware,
  IdempotencyStore,
  RateLimiter,
  RateLimiterStore,
  RateLimitHeaders,
  RateLimitMiddleware
} from "../src/index.js"
import { asClient, post, send, serve, TestServer, untilSleeping } from "./support/httpServer.js"

const hello = HttpRouter.empty.pipe(HttpRouter.get("/", HttpServerResponse.text("hello")))

describe("RateLimitMiddleware", () => {
  it.scoped("every response carries RateLimit-Policy and RateLimit as Structured Fields", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 3, refillPerSecond: 1 })
      yield* serve(hello.pipe(RateLimitMiddleware.make({ limiter, name: "api" })))
      const reply = yield* send(HttpClientRequest.get("/"))
      expect(reply.status).toBe(200)
      expect(RateLimitHeaders.parsePolicy(reply.headers["ratelimit-policy"]!)).toEqual(
        Option.some([{ name: "api", quota: 3, window: 3 }])
      )
      expect(RateLimitHeaders.parseRateLimit(reply.headers["ratelimit"]!)).toEqual(
        Option.some([{ name: "api", remaining: 2, reset: 1 }])
      )
    }).pipe(Effect.provide(Layer.merge(TestServer, RateLimiterStore.layerMemory))))

  it.scoped("over the limit: 429 problem+json with Retry-After >= 1, and the handler does not run", () =>
    Effect.gen(function*() {
      let runs = 0
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 0.5 })
      const app = HttpRouter.empty.pipe(
        HttpRouter.get("/", Effect.sync(() => HttpServerResponse.text(`run ${++runs}`))),
        RateLimitMiddleware.make({ limiter })
      )
      yield* serve(app)
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push(yield* send(HttpClientRequest.get("/")))
      expect(statuses.map((r) => r.status)).toEqual([200, 200, 429, 429])
      const denied = statuses[2]!
      expect(denied.headers["content-type"]).toBe("application/problem+json")
      expect(JSON.parse(denied.body).type).toBe(RateLimitMiddleware.quotaExceededType)
      expect(denied.headers["retry-after"]).toBe("2") // one token every 2 s
      // t: when more quota comes (draft 11), the moment Retry-After names — not the 4 s to refill the bucket
      expect(RateLimitHeaders.parseRateLimit(denied.headers["ratelimit"]!)).toEqual(
        Option.some([{ name: "default", remaining: 0, reset: 2 }])
      )
      expect(runs).toBe(2)
      yield* TestClock.adjust("2 seconds")
      expect((yield* send(HttpClientRequest.get("/"))).status).toBe(200)
    }).pipe(Effect.provide(Layer.merge(TestServer, RateLimiterStore.layerMemory))))

  it.scoped("limits each client separately, by address: a header the client chooses changes nothing", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 0.001 })
      yield* serve(hello.pipe(RateLimitMiddleware.make({ limiter })))
      // rotating X-Api-Key values admitted 6 of 6 through a 2-token bucket before
      const statuses: Array<number> = []
      for (let i = 0; i < 6; i++) {
        const reply = yield* send(HttpClientRequest.get("/").pipe(HttpClientRequest.setHeader("x-api-key", `k${i}`)))
        statuses.push(reply.status)
      }
      expect(statuses).toEqual([200, 200, 429, 429, 429, 429])
      // another client (another address) has its own quota, and cannot drain this one's by naming it
      const spoof = HttpClientRequest.get("/").pipe(
        HttpClientRequest.setHeaders({ "x-api-key": "127.0.0.1", "x-forwarded-for": "127.0.0.1" })
      )
      expect((yield* send(spoof).pipe(asClient("127.0.0.3"))).status).toBe(200)
    }).pipe(Effect.provide(Layer.merge(TestServer, RateLimiterStore.layerMemory))))

  it.scoped("before idempotency, a 429 is never stored under the key", () =>
    Effect.gen(function*() {
      let runs = 0
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const idempotent = yield* IdempotencyMiddleware.make()
      const orders = Effect.sync(() => HttpServerResponse.unsafeJson({ id: ++runs }, { status: 201 })).pipe(
        idempotent,
        RateLimitMiddleware.make({ limiter })
      )
      yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", orders)))
      expect((yield* post("/orders", { key: "a" })).status).toBe(201)
      expect((yield* post("/orders", { key: "b" })).status).toBe(429)
      yield* TestClock.adjust("1 second")
      const retried = yield* post("/orders", { key: "b" })
      expect(retried.status).toBe(201)
      expect(retried.headers["idempotent-replayed"]).toBeUndefined()
      expect(runs).toBe(2)
    }).pipe(Effect.provide(Layer.mergeAll(TestServer, RateLimiterStore.layerMemory, IdempotencyStore.layerMemory))))
})

describe("DeadlineMiddleware", () => {
  const remainingApp = (options?: DeadlineMiddleware.Options) =>
    HttpRouter.empty.pipe(
      HttpRouter.get(
        "/",
        Effect.map(Deadline.remaining, (r) =>
          HttpServerResponse.text(Option.match(r, {
            onNone: () => "none",
            onSome: (d) => String(Duration.toMillis(d))
          })))
      ),
      HttpRouter.get("/slow", Effect.as(Effect.sleep("10 seconds"), HttpServerResponse.text("late"))),
      DeadlineMiddleware.make(options)
    )
  const get = (path: string, header?: string) =>
    send(
      HttpClientRequest.get(path).pipe(
        header === undefined ? (r) => r : HttpClientRequest.setHeader("request-timeout-ms", header)
      )
    )

  it.scoped("runs the handler under the caller's budget, clamped to the server maximum", () =>
    Effect.gen(function*() {
      yield* serve(remainingApp({ maxTimeout: "2 seconds" }))
      expect((yield* get("/", "1500")).body).toBe("1500")
      expect((yield* get("/", "999999")).body).toBe("2000")
      expect((yield* get("/")).body).toBe("none")
    }).pipe(Effect.provide(TestServer)))

  it.scoped("a malformed header is ignored by default, or rejected with 400", () =>
    Effect.gen(function*() {
      yield* serve(remainingApp({ defaultTimeout: "5 seconds" }))
      for (const bad of ["-1", "1.5", "abc", "1e3", ""]) expect((yield* get("/", bad)).body).toBe("5000")
    }).pipe(Effect.provide(TestServer)))

  it.scoped("onMalformed: reject answers 400", () =>
    Effect.gen(function*() {
      yield* serve(remainingApp({ onMalformed: "reject" }))
      expect((yield* get("/", "soon")).status).toBe(400)
      expect((yield* get("/", "10")).status).toBe(200)
    }).pipe(Effect.provide(TestServer)))

  it.scoped("when the deadline passes the handler is interrupted and the answer is 504", () =>
    Effect.gen(function*() {
      yield* serve(remainingApp())
      const reply = yield* Effect.fork(get("/slow", "1000"))
      yield* untilSleeping
      yield* TestClock.adjust("1 second")
      const r = yield* Fiber.join(reply)
      expect(r.status).toBe(504)
      expect(JSON.parse(r.body).type).toContain("deadline-exceeded")
      expect((yield* get("/slow", "0")).status).toBe(504)
    }).pipe(Effect.provide(TestServer)))

  it("parses only non-negative integers", () => {
    expect(DeadlineMiddleware.parseHeader(" 250 ")).toBe(250)
    for (const bad of ["", "-1", "+1", "1.0", "0x10", "1".repeat(16), "١٢"]) {
      expect(DeadlineMiddleware.parseHeader(bad)).toBeUndefined()
    }
  })
})

describe("Chaos.middleware", () => {
  it.scoped("injects error responses with Retry-After without running the handler", () =>
    Effect.gen(function*() {
      let runs = 0
      const app = HttpRouter.empty.pipe(
        HttpRouter.get("/", Effect.sync(() => HttpServerResponse.text(`ok ${++runs}`))),
        Chaos.middleware({ errorResponse: { probability: 0.5, status: 503, retryAfter: "1500 millis" } })
      )
      yield* serve(app)
      const first = yield* send(HttpClientRequest.get("/"))
      const second = yield* send(HttpClientRequest.get("/"))
      expect(first.status).toBe(503) // draw 0.1 < 0.5
      expect(first.headers["retry-after"]).toBe("2")
      expect(second.status).toBe(200) // draw 0.9
      expect(runs).toBe(1)
    }).pipe(Effect.withRandom(Random.fixed([0.1, 0.9])), Effect.provide(TestServer)))

  it.scoped("loses the response after the handler committed: the client sees a transport error", () =>
    Effect.gen(function*() {
      let runs = 0
      const app = HttpRouter.empty.pipe(
        HttpRouter.post("/", Effect.sync(() => HttpServerResponse.text(`ok ${++runs}`))),
        Chaos.middleware({ lostResponse: { probability: 1 } })
      )
      yield* serve(app)
      const exit = yield* Effect.exit(send(HttpClientRequest.post("/")))
      expect(exit._tag).toBe("Failure")
      expect(runs).toBe(1) // the work happened; only the answer was lost
    }).pipe(Effect.provide(TestServer)))

  it.scoped("adds latency on the Clock", () =>
    Effect.gen(function*() {
      yield* serve(hello.pipe(Chaos.middleware({ latency: { probability: 1, delay: "3 seconds" } })))
      const reply = yield* Effect.fork(send(HttpClientRequest.get("/")))
      yield* untilSleeping
      yield* TestClock.adjust("3 seconds")
      expect((yield* Fiber.join(reply)).status).toBe(200)
    }).pipe(Effect.provide(TestServer)))

  it("rejects probabilities outside [0, 1] and bad statuses", () => {
    expect(() => Chaos.middleware({ lostResponse: { probability: 2 } })).toThrow(/probability/)
    expect(() => Chaos.client({ errorResponse: { probability: 0.1, status: 42 } })).toThrow(/status/)
  })
})

describe("middleware constructors", () => {
  it.scoped("validate their options when called, throwing IllegalArgumentException", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const invalid: ReadonlyArray<() => unknown> = [
        () => DeadlineMiddleware.make({ maxTimeout: -1 }),
        () => DeadlineMiddleware.make({ defaultTimeout: "soon" as Duration.DurationInput }),
        () => DeadlineMiddleware.make({ header: "" }),
        () => DeadlineMiddleware.make({ onMalformed: "drop" as "reject" }),
        () => RateLimitMiddleware.make({ limiter: undefined as unknown as RateLimiter.RateLimiter }),
        () => RateLimitMiddleware.make({ limiter, name: "é" }),
        () => RateLimitMiddleware.make({ limiter, cost: 2 as unknown as () => number }),
        () => IdempotencyMiddleware.make({ maxBodyBytes: 0 }),
        () => Chaos.client({ latency: { probability: 0.5, delay: -1 } })
      ]
      for (const build of invalid) expect(build).toThrow(Cause.IllegalArgumentException)
      // and valid options build without running anything
      expect(() => DeadlineMiddleware.make({ header: "X-Budget", onMalformed: "reject" })).not.toThrow()
      expect(() => RateLimitMiddleware.make({ limiter, cost: () => 2 })).not.toThrow()
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))
})
