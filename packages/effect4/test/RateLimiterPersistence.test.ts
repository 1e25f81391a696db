import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { RateLimiter as Persisted } from "effect/persistence"
import { TestClock } from "effect/testing"
import { Deadline, RateLimiterStore } from "../src/index.js"
import * as RateLimiterPersistence from "../src/RateLimiter/Persistence.js"

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

/** A backend that records the instant of every request it serves and answers each with `respond(n)` (n from 0). */
const backend = (respond: (n: number) => Response = () => new Response("ok")) => {
  const served: Array<number> = []
  const client = HttpClient.make((request) =>
    Effect.map(Clock.currentTimeMillis, (now) => HttpClientResponse.fromWeb(request, respond(served.push(now) - 1)))
  )
  return { client, served }
}

const get = <E, R>(client: HttpClient.HttpClient.With<E, R>) =>
  client.execute(HttpClientRequest.get("http://partner.test/orders"))

/** Five requests at once through `client`, then the clock moved 500 ms at a time; the instants served, from 0. */
const burst = (limiter: Persisted.RateLimiter) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const { client, served } = backend()
    const limited = client.pipe(
      HttpClient.withRateLimiter({ limiter, key: "partner", algorithm: "token-bucket", limit: 2, window: "1 second" })
    )
    const fibers = yield* Effect.forEach([1, 2, 3, 4, 5], () => Effect.forkChild(get(limited)))
    yield* settle
    const seen = [served.map((t) => t - start)]
    for (let i = 0; i < 3; i++) {
      yield* TestClock.adjust("500 millis")
      yield* settle
      seen.push(served.map((t) => t - start))
    }
    yield* Fiber.joinAll(fibers)
    return seen
  })

const exceededOf = <A, E>(exit: Exit.Exit<A, E>) => {
  const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
  return error instanceof Persisted.RateLimiterError && error.reason._tag === "RateLimitExceeded"
    ? error.reason
    : undefined
}

const withMemory = <A, E>(effect: Effect.Effect<A, E, RateLimiterStore.RateLimiterStore>) =>
  Effect.provide(effect, RateLimiterStore.layerMemory)

describe("RateLimiter/Persistence: our limiters as Effect 4's RateLimiter service", () => {
  it.effect("HttpClient.withRateLimiter admits through our token bucket: 2 at once, then one per 500 ms", () =>
    withMemory(Effect.gen(function*() {
      const seen = yield* burst(yield* RateLimiterPersistence.make())
      expect(seen).toEqual([[0, 0], [0, 0, 500], [0, 0, 500, 1000], [0, 0, 500, 1000, 1500]])
    })))

  it.effect("the same instants as Effect's own limiter over its memory store", () =>
    Effect.gen(function*() {
      const theirs = yield* Effect.flatMap(Persisted.RateLimiter, burst).pipe(
        Effect.provide(Persisted.layer.pipe(Layer.provide(Persisted.layerStoreMemory)))
      )
      const ours = yield* withMemory(Effect.flatMap(RateLimiterPersistence.make(), burst))
      expect(ours).toEqual(theirs)
    }))

  it.effect("a 429 with Retry-After is retried after it, through our limiter again", () =>
    withMemory(Effect.gen(function*() {
      const { client, served } = backend((n) =>
        n === 0 ? new Response("slow down", { status: 429, headers: { "retry-after": "2" } }) : new Response("ok")
      )
      const limited = client.pipe(
        HttpClient.withRateLimiter({
          limiter: yield* RateLimiterPersistence.make(),
          key: "partner",
          limit: 10,
          window: "1 second",
          times: 1,
          disableAdaptiveLearning: true
        })
      )
      const fiber = yield* Effect.forkChild(get(limited))
      yield* settle
      yield* TestClock.adjust("2 seconds")
      const response = yield* Fiber.join(fiber)
      expect(response.status).toBe(200)
      expect(served).toEqual([0, 2000])
    })))

  it.effect("onExceeded \"fail\": RateLimitExceeded with the time until the window ends", () =>
    withMemory(Effect.gen(function*() {
      const limiter = yield* RateLimiterPersistence.make()
      yield* TestClock.adjust("250 millis")
      const consume = limiter.consume({ key: "k", limit: 3, window: "1 second" })
      for (const remaining of [2, 1, 0]) {
        const result = yield* consume
        expect(result.remaining).toBe(remaining)
        expect(Duration.toMillis(result.delay)).toBe(0)
        expect(Duration.toMillis(result.resetAfter)).toBe(750)
      }
      const exceeded = exceededOf(yield* Effect.exit(consume))
      expect(exceeded).toMatchObject({ key: "k", limit: 3, remaining: 0 })
      expect(Duration.toMillis(exceeded!.retryAfter)).toBe(750)
      yield* TestClock.adjust("750 millis")
      expect((yield* consume).remaining).toBe(2)
    })))

  it.effect("windows: \"sliding-window\" runs Effect's fixed-window calls as our sliding window", () =>
    withMemory(Effect.gen(function*() {
      const fixed = yield* RateLimiterPersistence.make({ name: "fixed" })
      const sliding = yield* RateLimiterPersistence.make({ name: "sliding", windows: "sliding-window" })
      const admitted = (limiter: Persisted.RateLimiter) =>
        Effect.map(Effect.exit(limiter.consume({ key: "k", limit: 4, window: "1 second" })), Exit.isSuccess)
      yield* TestClock.adjust("900 millis")
      for (let i = 0; i < 4; i++) {
        expect(yield* admitted(fixed)).toBe(true)
        expect(yield* admitted(sliding)).toBe(true)
      }
      // 200 ms later, in the next window: the fixed window starts over, the sliding one still weighs the 4 at 90%
      yield* TestClock.adjust("200 millis")
      expect(yield* admitted(fixed)).toBe(true)
      expect(yield* admitted(sliding)).toBe(false)
    })))

  it.effect("a key's counters carry over when the caller changes the limit or the window", () =>
    withMemory(Effect.gen(function*() {
      const limiter = yield* RateLimiterPersistence.make()
      yield* limiter.consume({ key: "k", limit: 3, window: "10 seconds" })
      yield* limiter.consume({ key: "k", limit: 3, window: "10 seconds" })
      // a server said the limit is 2 (withRateLimiter passes what it learned): the two taken still count
      expect(exceededOf(yield* Effect.exit(limiter.consume({ key: "k", limit: 2, window: "10 seconds" }))))
        .toBeDefined()
      expect((yield* limiter.consume({ key: "k", limit: 3, window: "10 seconds" })).remaining).toBe(0)
      // another key is untouched
      expect((yield* limiter.consume({ key: "other", limit: 2, window: "10 seconds" })).remaining).toBe(1)
    })))

  it.effect("onExceeded \"delay\" waits inside consume, within the fiber's deadline", () =>
    withMemory(Effect.gen(function*() {
      const limiter = yield* RateLimiterPersistence.make()
      const options = { key: "k", limit: 1, window: "1 second", onExceeded: "delay" } as const
      yield* limiter.consume(options)
      // the wait would end past the deadline: at once, no sleep
      const late = yield* Effect.exit(limiter.consume(options).pipe(Deadline.within("500 millis")))
      expect(Duration.toMillis(exceededOf(late)!.retryAfter)).toBe(1000)
      expect(yield* Clock.currentTimeMillis).toBe(0)
      const fiber = yield* Effect.forkChild(limiter.consume(options))
      yield* settle
      yield* TestClock.adjust("999 millis")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 millis")
      const result = yield* Fiber.join(fiber)
      expect(Duration.toMillis(result.delay)).toBe(0)
      expect(result.remaining).toBe(0)
    })))

  it.effect("Effect's own makeWithRateLimiter works over the layer", () =>
    Effect.gen(function*() {
      const withLimiter = yield* Persisted.makeWithRateLimiter
      const ran: Array<number> = []
      const job = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => ran.push(now)))
      const limited = job.pipe(withLimiter({ key: "mail", limit: 2, window: "1 minute", onExceeded: "delay" }))
      const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.forkChild(limited))
      yield* settle
      expect(ran).toEqual([0, 0])
      yield* TestClock.adjust("1 minute")
      yield* Fiber.joinAll(fibers)
      expect(ran).toEqual([0, 0, 60_000])
    }).pipe(Effect.provide(RateLimiterPersistence.layer().pipe(Layer.provide(RateLimiterStore.layerMemory)))))

  it.effect("a store that could not decide is a RateLimitStoreError, never a quota used up", () =>
    Effect.gen(function*() {
      const outage = (allowed: boolean): RateLimiterStore.StoreDecision => ({
        allowed,
        limit: 5,
        remaining: 0,
        retryAfterMillis: allowed ? 0 : 1000,
        resetAfterMillis: allowed ? 0 : 1000,
        outage: true
      })
      const storeOf = (allowed: boolean): RateLimiterStore.Store => ({
        tokenBucket: () => Effect.succeed(outage(allowed)),
        fixedWindow: () => Effect.succeed(outage(allowed)),
        slidingWindow: () => Effect.succeed(outage(allowed))
      })
      const down = yield* Effect.provideService(
        RateLimiterPersistence.make(),
        RateLimiterStore.RateLimiterStore,
        storeOf(false)
      )
      const exit = yield* Effect.exit(down.consume({ key: "k", limit: 5, window: "1 second" }))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
      expect(error?._tag).toBe("RateLimiterError")
      expect(error?.reason._tag).toBe("RateLimitStoreError")
      // fail open: the store's policy was to allow, so the call passes
      const open = yield* Effect.provideService(
        RateLimiterPersistence.make(),
        RateLimiterStore.RateLimiterStore,
        storeOf(true)
      )
      expect((yield* open.consume({ key: "k", limit: 5, window: "1 second" })).limit).toBe(5)
    }))

  it.effect("bad parameters: tokens above the limit fail as Effect's do; nonsense dies, loudly", () =>
    withMemory(Effect.gen(function*() {
      const limiter = yield* RateLimiterPersistence.make()
      for (const onExceeded of ["fail", "delay"] as const) {
        const tooMany = exceededOf(
          yield* Effect.exit(limiter.consume({ key: "k", limit: 3, window: "2 seconds", tokens: 4, onExceeded }))
        )
        expect(Duration.toMillis(tooMany!.retryAfter)).toBe(2000)
      }
      // a learned limit may be fractional: rounded down; a fractional cost rounded up
      expect((yield* limiter.consume({ key: "f", limit: 2.9, window: "1 second", tokens: 1.5 })).remaining).toBe(0)
      const nonsense: ReadonlyArray<{ limit: number; window: Duration.Input; tokens?: number }> = [
        { limit: 0, window: "1 second" },
        { limit: 2, window: "1 second", tokens: 0 },
        { limit: 2, window: "1 second", tokens: Number.NaN },
        { limit: 2, window: Duration.infinity },
        { limit: 2, window: "-1 second" }
      ]
      for (const bad of nonsense) {
        const exit = yield* Effect.exit(limiter.consume({ key: "k", ...bad }))
        expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause), JSON.stringify(bad)).toBe(true)
        if (Exit.isFailure(exit)) expect(Cause.squash(exit.cause)).toBeInstanceOf(Cause.IllegalArgumentError)
      }
    })))

  it.effect("keeps no adaptive state: adaptiveConsume answers inactive, adaptiveFeedback is accepted", () =>
    withMemory(Effect.gen(function*() {
      const limiter = yield* RateLimiterPersistence.make()
      yield* limiter.adaptiveFeedback({
        key: "k",
        epoch: 0,
        tokens: 1,
        status: 429,
        retryAfter: Duration.seconds(5)
      })
      const adaptive = yield* limiter.adaptiveConsume({
        key: "k",
        tokens: 1,
        fallbackLimit: 1,
        fallbackWindow: Duration.seconds(1)
      })
      expect(adaptive.phase).toBe("inactive")
      expect(Duration.toMillis(adaptive.delay)).toBe(0)
    })))

  it("refuses options that could never work, when called", () => {
    expect(() => RateLimiterPersistence.make({ name: "" })).toThrow(Cause.IllegalArgumentError)
    expect(() => RateLimiterPersistence.layer({ windows: "rolling" as "fixed-window" })).toThrow(/windows/)
  })
})
