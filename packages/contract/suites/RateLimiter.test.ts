import {
  counterValue,
  type DurationInput,
  IllegalArgumentError,
  scoped,
  TestClock,
  wallClockAhead,
  withClock,
  withMetricAttributes
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { RateLimiter, RateLimiterStore } from "effect-resilience"
import { plain, rateLimiterSuite } from "./rateLimiterSuite.js"
import { fractionalSlidingWindow } from "./slidingWindow.js"

rateLimiterSuite("memory", RateLimiterStore.layerMemory)
fractionalSlidingWindow("memory", RateLimiterStore.layerMemory)

const advance = (millis: number) => TestClock.adjust(Duration.millis(millis))

/** A memory store (sweeping every `sweep` ms unless infinite) provided to the limiter constructors. */
const withStore = <A, E>(
  sweep: number,
  f: (
    store: RateLimiterStore.MemoryStore
  ) => Effect.Effect<A, E, RateLimiterStore.RateLimiterStore | import("effect").Scope.Scope>
) =>
  Effect.gen(function*() {
    const store = yield* RateLimiterStore.makeMemory({ sweepInterval: Duration.millis(sweep) })
    return yield* f(store).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, store))
  })

describe("RateLimiterStore.layerMemory eviction", () => {
  scoped(
    "idle keys are swept on the callers' time, also once every caller is idle",
    () =>
      withStore(1000, (store) =>
        Effect.gen(function*() {
          const bucket = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 1 })
          const fixed = yield* RateLimiter.fixedWindow({ limit: 2, window: "1 second" })
          const sliding = yield* RateLimiter.slidingWindow({ limit: 2, window: "1 second" })
          for (let i = 0; i < 1000; i++) {
            yield* bucket.tryAcquire(`k${i}`) // full again at 1000
            yield* fixed.tryAcquire(`k${i}`) // its window ends at 1000
            yield* sliding.tryAcquire(`k${i}`) // forgotten two windows on, at 2000
          }
          expect(yield* store.size).toBe(3000)
          // no call from now on. The sweeps at 1000, 2000, 3000 evict at the callers' time: their latest
          // instant (0), advanced by the time elapsed since the sweeper first saw it (at 1000)
          yield* advance(1000) // callers' time 0: nothing has expired
          expect(yield* store.size).toBe(3000)
          yield* advance(1000) // callers' time 1000: buckets full, fixed windows over
          expect(yield* store.size).toBe(1000)
          yield* advance(1000) // callers' time 2000: the sliding windows are forgotten
          expect(yield* store.size).toBe(0)
        }))
  )

  scoped("the sweep never evicts a live key when the store's clock is not the callers'", () =>
    Effect.gen(function*() {
      // the store is built on a clock an hour ahead of the callers' TestClock (say, the layer provided
      // outside TestContext); its sweep interval still elapses with the TestClock
      const hour = 3_600_000
      const ahead = yield* wallClockAhead(hour)
      const store = yield* RateLimiterStore.makeMemory({ sweepInterval: "1 second" }).pipe(withClock(ahead))
      yield* Effect.gen(function*() {
        // one token, refilled in 1,000 s
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 0.001 })
        expect((yield* limiter.tryAcquire("k")).allowed).toBe(true)
        expect((yield* limiter.tryAcquire("k")).allowed).toBe(false)
        yield* advance(5_000) // five sweeps
        expect(store.unsafeSize()).toBe(1)
        expect((yield* limiter.tryAcquire("k")).allowed).toBe(false)
      }).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, store))
    }))

  scoped("each build of layerMemory is a store of its own", () =>
    Effect.gen(function*() {
      const once = RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: "layer-builds" }).pipe(
        Effect.flatMap((limiter) => limiter.tryAcquire("k")),
        Effect.map((d) => d.allowed),
        Effect.scoped,
        Effect.provide(RateLimiterStore.layerMemory)
      )
      expect(yield* once).toBe(true)
      expect(yield* once).toBe(true)
    }))

  scoped(
    "a key costs nothing while it equals a fresh key",
    () =>
      withStore(Infinity, (store) =>
        Effect.gen(function*() {
          const bucket = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 1 })
          yield* bucket.tryAcquire("a")
          expect(store.unsafeSize()).toBe(1)
          yield* advance(1000)
          yield* store.evictExpired
          expect(store.unsafeSize()).toBe(0)
          // the next request sees a full bucket, exactly as before eviction
          expect(plain(yield* bucket.tryAcquire("a", 2))).toEqual({
            allowed: true,
            limit: 2,
            remaining: 0,
            retryAfter: 0,
            resetAfter: 2000
          })
        }))
  )

  scoped(
    "without a sweep, each new key evicts expired ones: the count stays bounded",
    () =>
      withStore(Infinity, (store) =>
        Effect.gen(function*() {
          const bucket = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
          for (let i = 0; i < 100; i++) yield* bucket.tryAcquire(`old${i}`)
          yield* advance(1000)
          for (let i = 0; i < 60; i++) yield* bucket.tryAcquire(`new${i}`)
          // 60 inserts evicted up to 120 expired keys: all 100 old ones are gone
          expect(store.unsafeSize()).toBe(60)
        }))
  )

  scoped(
    "a busy key does not hold back the eviction of idle keys behind it",
    () =>
      withStore(Infinity, (store) =>
        Effect.gen(function*() {
          const bucket = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 10 })
          yield* bucket.tryAcquire("busy")
          for (let i = 0; i < 50; i++) yield* bucket.tryAcquire(`idle${i}`)
          for (let t = 0; t < 10; t++) {
            yield* advance(100)
            yield* bucket.tryAcquire("busy")
          }
          yield* store.evictExpired
          expect(store.unsafeSize()).toBe(1)
        }))
  )

  scoped("layerMemoryWith validates its options", () =>
    Effect.sync(() => {
      expect(() => RateLimiterStore.layerMemoryWith({ sweepInterval: -1 })).toThrow(IllegalArgumentError)
    }))

  it("the synchronous core decides exactly like the limiter", () => {
    const store = RateLimiterStore.unsafeMakeMemory()
    const params = { name: "sync", capacity: 2, refillPerSecond: 1 }
    expect(store.sync.tokenBucket("k", 1, params, 0)).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterMillis: 0,
      resetAfterMillis: 1000
    })
    expect(store.sync.tokenBucket("k", 2, params, 0).retryAfterMillis).toBe(1000)
    expect(store.sync.tokenBucket("k", 3, params, 0).retryAfterMillis).toBe(Infinity)
    // a denied fresh key stays fresh: nothing stored
    const window = { name: "sync", limit: 2, windowMillis: 1000 }
    expect(store.sync.fixedWindow("fresh", 3, window, 0).allowed).toBe(false)
    expect(store.sync.slidingWindow("fresh", 3, window, 0).allowed).toBe(false)
    expect(store.unsafeSize()).toBe(1)
  })
})

describe("RateLimiterStore.Store", () => {
  scoped("a store of one's own is its three operations; the limiter uses their effects", () =>
    Effect.gen(function*() {
      const memory = RateLimiterStore.unsafeMakeMemory()
      const calls: Array<string> = []
      // what a user writes: no synchronous fast path, only the effectful operations
      const own: RateLimiterStore.Store = {
        tokenBucket: (key, cost, params, now) =>
          Effect.andThen(Effect.sync(() => calls.push("tb")), memory.tokenBucket(key, cost, params, now)),
        fixedWindow: (key, cost, params, now) =>
          Effect.andThen(Effect.sync(() => calls.push("fw")), memory.fixedWindow(key, cost, params, now)),
        slidingWindow: (key, cost, params, now) =>
          Effect.andThen(Effect.sync(() => calls.push("sw")), memory.slidingWindow(key, cost, params, now))
      }
      // the constructors need the store only: no Scope
      const make: Effect.Effect<RateLimiter.RateLimiter, never, RateLimiterStore.RateLimiterStore> = RateLimiter
        .tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const limiter = yield* Effect.provideService(make, RateLimiterStore.RateLimiterStore, own)
      expect((yield* limiter.tryAcquire("k")).allowed).toBe(true)
      expect((yield* limiter.tryAcquire("k")).allowed).toBe(false)
      expect(calls).toEqual(["tb", "tb"])
      // a spread copy of the memory store is a store of one's own too: same decisions, through its effects
      const copy: RateLimiterStore.Store = { ...memory }
      const window = yield* Effect.provideService(
        RateLimiter.fixedWindow({ limit: 1, window: "1 second" }),
        RateLimiterStore.RateLimiterStore,
        copy
      )
      expect((yield* window.tryAcquire("k")).allowed).toBe(true)
      expect((yield* window.tryAcquire("k")).allowed).toBe(false)
    }))
})

describe("RateLimiter options validation", () => {
  const throws = (f: () => unknown) => expect(f).toThrow(IllegalArgumentError)

  it("rejects impossible token buckets at construction", () => {
    for (const capacity of [0, -1, 1.5, NaN, Infinity]) {
      throws(() => RateLimiter.tokenBucket({ capacity, refillPerSecond: 1 }))
    }
    for (const refillPerSecond of [0, -1, NaN, Infinity]) {
      throws(() => RateLimiter.tokenBucket({ capacity: 1, refillPerSecond }))
    }
    throws(() => RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: "" }))
    // the time to fill overflows: accepted before, then every decision was NaN and denied
    throws(() => RateLimiter.tokenBucket({ capacity: 1e6, refillPerSecond: 1e-300 }))
    expect(() => RateLimiter.tokenBucket({ capacity: 1e6, refillPerSecond: 1e-6 })).not.toThrow()
    throws(() => RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, maxWait: -5 }))
  })

  it("rejects impossible windows at construction", () => {
    for (const make of [RateLimiter.fixedWindow, RateLimiter.slidingWindow]) {
      for (const limit of [0, -1, 2.5, NaN]) throws(() => make({ limit, window: "1 second" }))
      for (const window of [0, -1, NaN, "-1 second", "soon", Duration.infinity, 1e300, "1 nano"]) {
        throws(() => make({ limit: 1, window: window as DurationInput }))
      }
    }
  })

  scoped("acquire rejects a malformed maxWait", () =>
    withStore(Infinity, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
        expect(() => limiter.acquire("k", 1, { maxWait: -1 })).toThrow(IllegalArgumentError)
      })))
})

describe("RateLimiter observability", () => {
  scoped(
    "counts allowed and denied decisions by algorithm and limiter",
    () =>
      withStore(Infinity, () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.fixedWindow({ limit: 2, window: "1 second", name: "metrics-test" })
          for (let i = 0; i < 5; i++) yield* limiter.tryAcquire("k")
          const labels = { algorithm: "fixed-window", limiter: "metrics-test" }
          expect(yield* counterValue(RateLimiter.allowedTotal, labels)).toBe(2)
          expect(yield* counterValue(RateLimiter.deniedTotal, labels)).toBe(3)
        }))
  )

  scoped("honours the fiber's metric tags", () =>
    withStore(Infinity, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: "metrics-tags" })
        yield* limiter.tryAcquire("k").pipe(withMetricAttributes({ route: "/orders" }))
        const labels = { algorithm: "token-bucket", limiter: "metrics-tags", route: "/orders" }
        expect(yield* counterValue(RateLimiter.allowedTotal, labels)).toBe(1)
      })))

  scoped("annotates the current span with the decision", () =>
    withStore(Infinity, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: "span-test" })
        const attributes = yield* Effect.gen(function*() {
          yield* limiter.tryAcquire("k")
          yield* limiter.tryAcquire("k")
          const span = yield* Effect.currentSpan
          return span.attributes
        }).pipe(Effect.withSpan("request"))
        expect(attributes.get("rate_limiter.name")).toBe("span-test")
        expect(attributes.get("rate_limiter.algorithm")).toBe("token-bucket")
        expect(attributes.get("rate_limiter.allowed")).toBe(false)
        expect(attributes.get("rate_limiter.retry_after_ms")).toBe(1000)
      })))
})
