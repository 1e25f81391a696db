/**
 * The rate-limiter algorithm suite, run against any store layer: `RateLimiterStore.layerMemory` in
 * `RateLimiter.test.ts`, `layerRedis` in `RateLimiterStore.redis.int.test.ts`. Every test uses fresh limiter
 * names, so a shared remote store needs no cleanup between tests; time is virtual (`TestClock`, or a clock
 * the properties move by hand), passed to the store.
 */
import {
  diedOf,
  failureOf,
  fc,
  forkUntilSleeping,
  handClock,
  IllegalArgumentError,
  pollFiber,
  recordingSleeps,
  TestClock,
  withClock,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import type { Layer } from "effect"
import { Cause, Clock, Duration, Effect, Exit, Fiber } from "effect"
import { Deadline, RateLimiter, type RateLimiterStore } from "effect-resilience"

let counter = 0
/** A name no other test (or other run of this suite against the same store) uses. */
const fresh = (prefix: string) => `${prefix}-${process.pid}-${++counter}`

type Decision = RateLimiter.Decision

/** A decision in plain millis, to compare exactly. */
export const plain = (d: Decision) => ({
  allowed: d.allowed,
  limit: d.limit,
  remaining: d.remaining,
  retryAfter: Duration.toMillis(d.retryAfter),
  resetAfter: Duration.toMillis(d.resetAfter)
})

const ok = (limit: number, remaining: number, resetAfter: number) => ({
  allowed: true,
  limit,
  remaining,
  retryAfter: 0,
  resetAfter
})
const no = (limit: number, remaining: number, retryAfter: number, resetAfter: number) => ({
  allowed: false,
  limit,
  remaining,
  retryAfter,
  resetAfter
})

const take = (limiter: RateLimiter.RateLimiter, key: string, cost = 1) =>
  Effect.map(limiter.tryAcquire(key, cost), plain)

const advance = (millis: number) => TestClock.adjust(Duration.millis(millis))

/** A forked effect's exit if it finished, `undefined` otherwise. */
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.andThen(yieldNow, Effect.sync(() => pollFiber(fiber)))

type Make = (
  name: string
) => Effect.Effect<RateLimiter.RateLimiter, never, RateLimiterStore.RateLimiterStore | import("effect").Scope.Scope>

const algorithms: ReadonlyArray<readonly [string, (limit: number, windowOrRate: number) => Make]> = [
  [
    "token bucket",
    (limit, rate) => (name) => RateLimiter.tokenBucket({ capacity: limit, refillPerSecond: rate, name })
  ],
  ["fixed window", (limit, w) => (name) => RateLimiter.fixedWindow({ limit, window: Duration.millis(w), name })],
  ["sliding window", (limit, w) => (name) => RateLimiter.slidingWindow({ limit, window: Duration.millis(w), name })]
]

/** Registers the algorithm tests for a store. */
export const rateLimiterSuite = (storeName: string, layer: Layer.Layer<RateLimiterStore.RateLimiterStore>) => {
  const scoped = <A, E>(
    effect: Effect.Effect<A, E, RateLimiterStore.RateLimiterStore | import("effect").Scope.Scope>
  ) => effect.pipe(Effect.provide(layer), Effect.scoped, recordingSleeps)

  describe(`RateLimiter.tokenBucket (${storeName})`, () => {
    it.effect("starts full, then denies with the time until enough tokens exist", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 3, refillPerSecond: 1, name: fresh("tb") })
        expect(limiter.limit).toBe(3)
        expect(yield* take(limiter, "k")).toEqual(ok(3, 2, 1000))
        expect(yield* take(limiter, "k")).toEqual(ok(3, 1, 2000))
        expect(yield* take(limiter, "k")).toEqual(ok(3, 0, 3000))
        expect(yield* take(limiter, "k")).toEqual(no(3, 0, 1000, 3000))
        yield* advance(400)
        expect(yield* take(limiter, "k")).toEqual(no(3, 0, 600, 2600))
        yield* advance(600)
        expect(yield* take(limiter, "k")).toEqual(ok(3, 0, 3000))
        yield* advance(1500)
        // 1.5 tokens: one whole token, and half a second until the second
        expect(yield* take(limiter, "k", 2)).toEqual(no(3, 1, 500, 1500))
        expect(yield* take(limiter, "k")).toEqual(ok(3, 0, 2500))
        yield* advance(60_000)
        expect(yield* take(limiter, "k", 3)).toEqual(ok(3, 0, 3000))
      })))

    it.effect("refills continuously at fractional rates, rounding waits up to whole milliseconds", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 3, name: fresh("tb") })
        expect(yield* take(limiter, "k", 2)).toEqual(ok(2, 0, 667))
        expect(yield* take(limiter, "k")).toEqual(no(2, 0, 334, 667))
        yield* advance(333)
        expect(yield* take(limiter, "k")).toEqual(no(2, 0, 1, 334))
        yield* advance(1)
        expect(yield* take(limiter, "k")).toEqual(ok(2, 0, 666))
        // refills of 1000 / 3 ms add up exactly: three tokens after one second
        yield* advance(1000)
        expect((yield* take(limiter, "k", 2)).allowed).toBe(true)
      })))

    it.effect("a full bucket admits its whole capacity at today's instants, whatever the rate", () =>
      // set before the store is built: its sweeper would wake once per second of the jump
      Effect.andThen(
        TestClock.setTime(1_700_000_000_000),
        scoped(Effect.gen(function*() {
          // at epoch scale `now + capacity / rate - now` exceeded the capacity's span by a rounding: the whole
          // capacity was denied at every instant, with a retryAfter of 1 ms that never helped
          for (const refillPerSecond of [22, 3, 7, 0.3]) {
            const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond, name: fresh("tb") })
            expect((yield* take(limiter, "k", 2)).allowed).toBe(true)
            yield* advance(Math.ceil(2000 / refillPerSecond))
            expect((yield* take(limiter, "k", 2)).allowed).toBe(true)
          }
        }))
      ))

    it.effect("keeps keys and limiters apart", () =>
      scoped(Effect.gen(function*() {
        const a = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: fresh("tb") })
        const b = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: fresh("tb") })
        expect((yield* take(a, "x")).allowed).toBe(true)
        expect((yield* take(a, "x")).allowed).toBe(false)
        expect((yield* take(a, "y")).allowed).toBe(true)
        expect((yield* take(b, "x")).allowed).toBe(true)
      })))

    it.effect("limiters with the same name share counters", () =>
      scoped(Effect.gen(function*() {
        const name = fresh("tb")
        const a = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name })
        const b = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name })
        expect((yield* take(a, "x")).allowed).toBe(true)
        expect((yield* take(b, "x")).allowed).toBe(false)
      })))
  })

  describe(`RateLimiter.fixedWindow (${storeName})`, () => {
    it.effect("counts per aligned window and denies until the window ends", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.fixedWindow({ limit: 3, window: "1 second", name: fresh("fw") })
        yield* advance(250) // windows are aligned to multiples of the window, not to the first request
        expect(yield* take(limiter, "k")).toEqual(ok(3, 2, 750))
        expect(yield* take(limiter, "k", 2)).toEqual(ok(3, 0, 750))
        expect(yield* take(limiter, "k")).toEqual(no(3, 0, 750, 750))
        yield* advance(749)
        expect(yield* take(limiter, "k")).toEqual(no(3, 0, 1, 1))
        yield* advance(1)
        expect(yield* take(limiter, "k", 2)).toEqual(ok(3, 1, 1000))
        expect(yield* take(limiter, "k", 2)).toEqual(no(3, 1, 1000, 1000))
        expect(yield* take(limiter, "k")).toEqual(ok(3, 0, 1000))
        yield* advance(5_500)
        expect(yield* take(limiter, "k", 3)).toEqual(ok(3, 0, 500))
      })))
  })

  describe(`RateLimiter.slidingWindow (${storeName})`, () => {
    it.effect("weighs the previous window by the part of it still inside the sliding window", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.slidingWindow({ limit: 4, window: "1 second", name: fresh("sw") })
        expect(yield* take(limiter, "k")).toEqual(ok(4, 3, 2000))
        expect(yield* take(limiter, "k", 3)).toEqual(ok(4, 0, 2000))
        // full: the next window's estimate 4 × (1 - f) + 1 <= 4 from f = 1/4
        expect(yield* take(limiter, "k")).toEqual(no(4, 0, 1250, 2000))
        yield* advance(1250)
        expect(yield* take(limiter, "k")).toEqual(ok(4, 0, 1750)) // 4 × 0.75 + 1
        // 4 × (1 - f) + 1 + 1 <= 4 from f = 1/2
        expect(yield* take(limiter, "k")).toEqual(no(4, 0, 250, 1750))
        yield* advance(250)
        expect(yield* take(limiter, "k")).toEqual(ok(4, 0, 1500))
        yield* advance(250) // 4 × 0.25 + 2 = 3
        expect(yield* take(limiter, "k")).toEqual(ok(4, 0, 1250))
        yield* advance(500) // a quarter into the next window: previous 3 × 0.75 + 0
        expect(yield* take(limiter, "k")).toEqual(ok(4, 0, 1750))
        // 3 × (1 - f) + 1 + 1 <= 4 from f = 1/3, 83.3 ms away
        expect(yield* take(limiter, "k")).toEqual(no(4, 0, 84, 1750))
        yield* advance(2000) // two windows later everything is forgotten
        expect(yield* take(limiter, "k")).toEqual(ok(4, 3, 1750))
      })))
  })

  describe(`RateLimiter.acquire (${storeName})`, () => {
    // A forked `acquire` asks the store, then sleeps on the TestClock. A remote store answers over the
    // network, so each test waits until the fiber sleeps before it moves the clock (moved earlier, the
    // sleep would start from the later time); once the clock has passed the wait, the fiber asks the
    // store again, so its exit is awaited, not polled.
    it.effect("waits on the Clock until the request passes", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 2, name: fresh("acq") })
        yield* limiter.tryAcquire("k", 2)
        const fiber = yield* forkUntilSleeping(limiter.acquire("k", 2), 1000)
        yield* advance(999)
        expect(yield* poll(fiber)).toBeUndefined()
        yield* advance(1)
        const exit = yield* Fiber.await(fiber)
        expect(Exit.isSuccess(exit) && plain(exit.value)).toEqual(ok(2, 0, 1000))
      })))

    it.effect("waits for the next window", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.fixedWindow({ limit: 1, window: "1 minute", name: fresh("acq") })
        yield* limiter.tryAcquire("k")
        const fiber = yield* forkUntilSleeping(limiter.acquire("k"), 60_000)
        yield* advance(59_999)
        expect(yield* poll(fiber)).toBeUndefined()
        yield* advance(1)
        expect(Exit.isSuccess(yield* Fiber.await(fiber))).toBe(true)
      })))

    it.effect("fails at once with RateLimited when the wait would pass the deadline", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: fresh("acq") })
        yield* limiter.tryAcquire("k")
        const error = yield* Effect.flip(limiter.acquire("k").pipe(Deadline.within("1 second")))
        expect(error._tag).toBe("RateLimited")
        if (error._tag !== "RateLimited") return
        expect(error.reason).toBe("deadline")
        expect(Duration.toMillis(error.retryAfter)).toBe(1000)
        expect(plain(error.decision)).toEqual(no(1, 0, 1000, 1000))
        expect(yield* Clock.currentTimeMillis).toBe(0) // no sleep happened
        // a deadline after the wait lets it through
        const fiber = yield* forkUntilSleeping(limiter.acquire("k").pipe(Deadline.within("1001 millis")), 1000)
        yield* advance(1000)
        expect(Exit.isSuccess(yield* Fiber.await(fiber))).toBe(true)
      })))

    it.effect("fails with RateLimited when the wait would pass maxWait", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({
          capacity: 1,
          refillPerSecond: 1,
          maxWait: "500 millis",
          name: fresh("acq")
        })
        yield* limiter.tryAcquire("k")
        const error = yield* Effect.flip(limiter.acquire("k"))
        expect(error.reason).toBe("max-wait")
        expect(Duration.toMillis(error.retryAfter)).toBe(1000)
        const immediate = yield* Effect.flip(limiter.acquire("k", 1, { maxWait: 0 }))
        expect(immediate.reason).toBe("max-wait")
        // the per-call option overrides the limiter's
        const fiber = yield* forkUntilSleeping(limiter.acquire("k", 1, { maxWait: "1 second" }), 1000)
        yield* advance(1000)
        expect(Exit.isSuccess(yield* Fiber.await(fiber))).toBe(true)
      })))

    it.effect("counts maxWait over all waits when another waiter takes the units first", () =>
      scoped(Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: fresh("acq") })
        yield* limiter.tryAcquire("k")
        const a = yield* forkUntilSleeping(Effect.exit(limiter.acquire("k", 1, { maxWait: "1500 millis" })), 1000)
        const b = yield* forkUntilSleeping(Effect.exit(limiter.acquire("k", 1, { maxWait: "1500 millis" })), 1000)
        yield* advance(1000)
        // both woke at 1 s; one took the token, the other would need 1 s more: 2 s > 1.5 s in all
        const results = [yield* Fiber.join(a), yield* Fiber.join(b)]
        expect(results.filter(Exit.isSuccess)).toHaveLength(1)
        const failed = results.find(Exit.isFailure)
        expect(failed && failureOf(failed)?.reason).toBe("max-wait")
        expect(yield* Clock.currentTimeMillis).toBe(1000)
      })))
  })

  describe(`RateLimiter properties (${storeName})`, () => {
    // half the requests arrive in bursts (no delay): bursts are where limits are tested
    const delay = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 700 }))
    const ops = fc.array(fc.record({ delay, cost: fc.integer({ min: 1, max: 8 }) }), { minLength: 1, maxLength: 40 })

    // The properties only read the time (tryAcquire never sleeps), so they move a virtual clock by hand:
    // `TestClock.adjust` waits for every fiber to suspend, several real timer ticks per call, and
    // `it.effect.prop` builds a TestContext per sample, together most of these properties' run time.
    const { advance, clock, reset } = handClock()

    /** A property over fresh limiters, time starting at 0 for every sample. */
    const property = <A>(
      name: string,
      arbitrary: fc.Arbitrary<A>,
      body: (a: A) => Effect.Effect<void, never, RateLimiterStore.RateLimiterStore | import("effect").Scope.Scope>
    ) =>
      it(name, () =>
        fc.assert(
          fc.asyncProperty(arbitrary, async (a) => {
            const exit = await Effect.runPromiseExit(
              withClock(clock)(Effect.andThen(reset, scoped(body(a))))
            )
            if (Exit.isFailure(exit)) throw Cause.squash(exit.cause)
          }),
          { numRuns: 50 }
        ))

    /** Runs the ops one after the other; returns the admitted (time, cost) pairs. */
    const drive = (
      limiter: RateLimiter.RateLimiter,
      steps: ReadonlyArray<{ readonly delay: number; readonly cost: number }>
    ) =>
      Effect.gen(function*() {
        const admitted: Array<readonly [number, number]> = []
        for (const { cost, delay } of steps) {
          if (delay > 0) yield* advance(delay)
          const c = Math.min(cost, limiter.limit)
          const d = yield* limiter.tryAcquire("k", c)
          if (d.allowed) admitted.push([yield* Clock.currentTimeMillis, c])
        }
        return admitted
      })

    property(
      "a token bucket never admits more than capacity + rate × elapsed in any interval",
      fc.record({ capacity: fc.integer({ min: 1, max: 8 }), rate: fc.integer({ min: 1, max: 4000 }), steps: ops }),
      ({ capacity, rate, steps }) =>
        Effect.gen(function*() {
          const perSecond = rate / 1000 // 0.001 .. 4 tokens per second
          const limiter = yield* RateLimiter.tokenBucket({ capacity, refillPerSecond: perSecond, name: fresh("p") })
          const admitted = yield* drive(limiter, steps)
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0
            for (let j = i; j < admitted.length; j++) {
              sum += admitted[j]![1]
              const elapsed = (admitted[j]![0] - admitted[i]![0]) / 1000
              expect(sum).toBeLessThanOrEqual(capacity + perSecond * elapsed + 1e-6)
            }
          }
        })
    )

    property(
      "a fixed window never admits more than limit per window",
      fc.record({ limit: fc.integer({ min: 1, max: 8 }), window: fc.integer({ min: 1, max: 2000 }), steps: ops }),
      ({ limit, steps, window }) =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.fixedWindow({ limit, window: Duration.millis(window), name: fresh("p") })
          const perWindow = new Map<number, number>()
          for (const [t, c] of yield* drive(limiter, steps)) {
            const w = Math.floor(t / window)
            perWindow.set(w, (perWindow.get(w) ?? 0) + c)
          }
          for (const n of perWindow.values()) expect(n).toBeLessThanOrEqual(limit)
        })
    )

    property(
      "a sliding window admits at most limit per aligned window and under 2 × limit in any window",
      fc.record({ limit: fc.integer({ min: 1, max: 8 }), window: fc.integer({ min: 1, max: 2000 }), steps: ops }),
      ({ limit, steps, window }) =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.slidingWindow({ limit, window: Duration.millis(window), name: fresh("p") })
          const admitted = yield* drive(limiter, steps)
          const perWindow = new Map<number, number>()
          for (const [t, c] of admitted) {
            const w = Math.floor(t / window)
            perWindow.set(w, (perWindow.get(w) ?? 0) + c)
          }
          for (const n of perWindow.values()) expect(n).toBeLessThanOrEqual(limit)
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0
            for (let j = i; j < admitted.length && admitted[j]![0] - admitted[i]![0] < window; j++) {
              sum += admitted[j]![1]
            }
            expect(sum).toBeLessThan(2 * limit)
          }
        })
    )

    for (const [name, make] of algorithms) {
      property(
        `${name}: a denied request is still denied 1 ms before retryAfter and passes at retryAfter`,
        fc.record({
          limit: fc.integer({ min: 1, max: 8 }),
          param: fc.integer({ min: 1, max: 3000 }),
          steps: ops,
          cost: fc.integer({ min: 1, max: 8 })
        }),
        ({ cost, limit, param, steps }) =>
          Effect.gen(function*() {
            const limiter = yield* make(limit, name === "token bucket" ? 1 + param / 100 : param)(fresh("p"))
            yield* drive(limiter, steps)
            const c = Math.min(cost, limit)
            const d = yield* limiter.tryAcquire("k", c)
            if (d.allowed) return
            const wait = Duration.toMillis(d.retryAfter)
            expect(wait).toBeGreaterThanOrEqual(1)
            expect(Number.isInteger(wait)).toBe(true)
            yield* advance(wait - 1)
            expect((yield* limiter.tryAcquire("k", c)).allowed).toBe(false)
            yield* advance(1)
            expect((yield* limiter.tryAcquire("k", c)).allowed).toBe(true)
          })
      )

      property(
        `${name}: after resetAfter with no traffic the key is back to its initial state`,
        fc.record({ limit: fc.integer({ min: 1, max: 8 }), param: fc.integer({ min: 1, max: 3000 }), steps: ops }),
        ({ limit, param, steps }) =>
          Effect.gen(function*() {
            const limiter = yield* make(limit, name === "token bucket" ? 1 + param / 100 : param)(fresh("p"))
            yield* drive(limiter, steps)
            const d = yield* limiter.tryAcquire("k", 1)
            yield* advance(Duration.toMillis(d.resetAfter))
            const full = yield* limiter.tryAcquire("k", limit)
            expect(full.allowed).toBe(true)
            expect(full.remaining).toBe(0)
          })
      )
    }
  })

  describe(`RateLimiter cost validation (${storeName})`, () => {
    for (const [name, make] of algorithms) {
      it.effect(`${name}: a cost that can never pass dies with an illegal-argument error, at once`, () =>
        scoped(Effect.gen(function*() {
          const limiter = yield* make(3, 1000)(fresh("v"))
          for (const cost of [0, -1, 1.5, NaN, Infinity, 4]) {
            for (const effect of [limiter.tryAcquire("k", cost), limiter.acquire("k", cost)]) {
              const exit = yield* Effect.exit(effect)
              expect(diedOf(exit)).toBe(true)
              if (Exit.isFailure(exit)) {
                expect(Cause.squash(exit.cause)).toBeInstanceOf(IllegalArgumentError)
              }
            }
          }
          expect((yield* limiter.tryAcquire("k", 3)).allowed).toBe(true)
        })))
    }
  })
}
