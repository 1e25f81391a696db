import { fork, handClock, HttpServerRequest, HttpServerResponse, provideClock, scoped, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option } from "effect"
import {
  CircuitBreaker,
  Deadline,
  IdempotencyMiddleware,
  IdempotencyStore,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware
} from "effect-resilience"

// Issue 31, item 2: a step of the process's wall clock (an NTP step, a VM resumed) must not move durations that
// live in one process. The hand clock steps `currentTimeMillis` alone; its monotonic reading (Effect 4's
// `monotonicTimeNanos`, Effect 3's `currentTimeNanos`) and its sleepers keep real time, as `process.hrtime` and
// Node's timers do.

/** Lets forked fibers run until they block, web request bodies included (read through promises). */
const settle = Effect.andThen(
  Effect.repeat(yieldNow, { times: 20 }),
  Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
)

/** A hand clock whose wall clock reads 2025-01-01 when the test starts. */
const withSteppedClock = <A, E, R>(
  f: (
    advance: (millis: number) => Effect.Effect<void>,
    stepWall: (millis: number) => Effect.Effect<void>
  ) => Effect.Effect<A, E, R>
) =>
  Effect.suspend(() => {
    const hand = handClock()
    return Effect.andThen(
      hand.stepWall(Date.UTC(2025, 0, 1)),
      f((millis) => Effect.andThen(hand.advance(millis), settle), hand.stepWall).pipe(provideClock(hand.clock))
    )
  })

const call = <E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  request: HttpServerRequest.HttpServerRequest
) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)

const order = (key: string) =>
  HttpServerRequest.fromWeb(
    new Request("http://127.0.0.1/orders", {
      method: "POST",
      body: "{\"sku\":\"A\"}",
      headers: { "idempotency-key": key, "content-type": "application/json" }
    })
  )

describe("a step of the wall clock", () => {
  scoped(
    "+15 s during a 4 s keyed handler with a 10 s lease: the retry gets 409, the handler runs once",
    () =>
      withSteppedClock((advance, stepWall) =>
        Effect.gen(function*() {
          const idempotent = yield* IdempotencyMiddleware.make({
            lease: "10 seconds",
            scope: () => Effect.succeed("c")
          })
          let runs = 0
          const app = idempotent(Effect.gen(function*() {
            runs++
            yield* Effect.sleep("4 seconds")
            return HttpServerResponse.text(`order ${runs}`, { status: 201 })
          }))
          const first = yield* fork(call(app, order("k-1")))
          yield* advance(0)
          expect(runs).toBe(1)
          yield* advance(1_000)
          yield* stepWall(15_000)
          // forked: a retry that took the key over would wait for its own 4 s run
          const retry = yield* fork(call(app, order("k-1")))
          yield* advance(0)
          // before the fix: the retry took the key over (its lease, 10 s on the wall clock, had run out) and ran
          // the handler a second time
          expect(runs).toBe(1)
          expect((yield* Fiber.join(retry)).status).toBe(409)
          yield* advance(3_000)
          expect((yield* Fiber.join(first)).status).toBe(201)
          const replayed = yield* call(app, order("k-1"))
          expect({ status: replayed.status, runs }).toEqual({ status: 201, runs: 1 })
        }).pipe(Effect.provide(IdempotencyStore.layerMemory))
      )
  )

  scoped(
    "-10 min with a spent token bucket: Retry-After is the refill time, and it admits then",
    () =>
      withSteppedClock((advance, stepWall) =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.tokenBucket({ capacity: 4, refillPerSecond: 1 })
          const app = RateLimitMiddleware.make({ limiter, scope: () => Effect.succeed("customer-7") })(
            Effect.succeed(HttpServerResponse.text("ok"))
          )
          const get = call(app, HttpServerRequest.fromWeb(new Request("http://127.0.0.1/orders")))
          for (let i = 0; i < 4; i++) expect((yield* get).status).toBe(200)
          expect((yield* get).headers["retry-after"]).toBe("1")
          yield* stepWall(-600_000)
          const denied = yield* get
          // before the fix: Retry-After: 601 (the bucket's "full at" instant was 10 min ahead of the stepped clock),
          // and it admitted only 601 s later (Effect 3: the sweep evicted the key 6 s later, as it measured the time
          // passed on the wall clock too)
          expect({ status: denied.status, retryAfter: denied.headers["retry-after"] }).toEqual({
            status: 429,
            retryAfter: "1"
          })
          yield* advance(999)
          expect((yield* get).status).toBe(429)
          yield* advance(1)
          expect((yield* get).status).toBe(200)
        }).pipe(Effect.provide(RateLimiterStore.layerMemory)) // its sweep on the same clock, as in a server
      )
  )

  scoped(
    "-10 min with an open breaker: it half-opens after openFor, not 10 min later",
    () =>
      withSteppedClock((advance, stepWall) =>
        Effect.gen(function*() {
          const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "30 seconds" })
          yield* Effect.exit(breaker.protect(Effect.fail("down")))
          expect(yield* breaker.state).toBe("open")
          yield* stepWall(-600_000)
          yield* advance(30_000)
          // before the fix: still open (its openUntil was 10 min ahead of the stepped clock)
          expect(yield* breaker.state).toBe("half-open")
        })
      )
  )

  scoped(
    "+15 s under Deadline.within: the time left does not move",
    () =>
      withSteppedClock((advance, stepWall) =>
        Effect.gen(function*() {
          const left = yield* Effect.gen(function*() {
            yield* advance(1_000)
            yield* stepWall(15_000)
            return yield* Deadline.remaining
          }).pipe(Deadline.within("5 seconds"))
          // before the fix: none left (0 ms): the deadline was an instant of the wall clock
          expect(Option.map(left, Duration.toMillis)).toEqual(Option.some(4_000))
        })
      )
  )

  it.live("on the live clock, a step of Date.now moves no lease and no bucket", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const claim = store.claim({
        scope: "s",
        key: "k",
        fingerprint: "f",
        ttl: Duration.hours(1),
        lease: Duration.seconds(10)
      })
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      expect((yield* claim)._tag).toBe("Claimed")
      expect((yield* limiter.tryAcquire("k")).allowed).toBe(true)
      const wall = Date.now
      try {
        // the live Clock reads `currentTimeMillis` from Date.now and its monotonic reading from process.hrtime
        Date.now = () => wall() + 15_000
        // before the fix: Claimed (the lease had run out by the stepped wall clock)
        expect((yield* claim)._tag).toBe("InProgress")
        Date.now = () => wall() - 600_000
        // before the fix: about 601 s
        expect(Duration.toMillis((yield* limiter.tryAcquire("k")).retryAfter)).toBeLessThanOrEqual(1_000)
      } finally {
        Date.now = wall
      }
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))
})
