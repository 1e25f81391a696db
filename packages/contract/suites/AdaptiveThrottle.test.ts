import { counterValue, failureOf, TestClock, withSeed } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit } from "effect"
import { AdaptiveThrottle } from "effect-resilience"

/**
 * Runs `n` calls of `backend` through the throttle, 100 ms of `TestClock` apart per ten calls; returns how many
 * reached the backend and how many the throttle refused.
 */
const drive = <E>(
  throttle: AdaptiveThrottle.AdaptiveThrottle,
  key: string,
  n: number,
  backend: () => Effect.Effect<void, E>
) =>
  Effect.gen(function*() {
    let reached = 0
    let rejected = 0
    for (let i = 0; i < n; i++) {
      const exit = yield* Effect.exit(throttle.protect(Effect.suspend(() => (reached++, backend())), key))
      if (isLocal(failureOf(exit))) rejected++
      if (i % 10 === 9) yield* TestClock.adjust("100 millis")
    }
    return { reached, rejected }
  })

const isLocal = (e: unknown): e is AdaptiveThrottle.LocallyRejected =>
  typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "LocallyRejected"

/** The throttle draws from `Random`: a fixed seed, so the statistical bounds below are met or missed for good. */
const seeded = withSeed("AdaptiveThrottle.test")

describe("AdaptiveThrottle", () => {
  it.effect("rejects nothing while the backend accepts everything", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make()
      const { reached, rejected } = yield* drive(throttle, "a", 500, () => Effect.void)
      expect(reached).toBe(500)
      expect(rejected).toBe(0)
      expect(yield* throttle.probability("a")).toBe(0)
    })))

  it.effect("uncapped, when the backend refuses everything, almost nothing more is sent; the rest fails locally", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ name: "down", maxRejectionRate: 1 })
      const before = yield* counterValue(AdaptiveThrottle.rejectionsTotal, { throttle: "down" })
      const { reached, rejected } = yield* drive(throttle, "a", 1_000, () => Effect.fail("503"))
      expect(reached + rejected).toBe(1_000)
      // with no accepts the probability is r / (r + 1): after the first few, nearly every call stays home
      expect(reached).toBeLessThan(30)
      expect(yield* throttle.probability("a")).toBeGreaterThan(0.99)
      const after = yield* counterValue(AdaptiveThrottle.rejectionsTotal, { throttle: "down" })
      expect(after - before).toBe(rejected)
    })))

  it.effect("by default at most 90 % are rejected: a backend that refuses everything still gets a tenth", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make()
      const { reached, rejected } = yield* drive(throttle, "a", 2_000, () => Effect.fail("503"))
      expect(reached + rejected).toBe(2_000)
      // draws against p = 0.9 once the first few calls have failed: about 200 reach it (binomial, sd ~13)
      expect(reached).toBeGreaterThan(150)
      expect(reached).toBeLessThan(260)
      expect(yield* throttle.probability("a")).toBe(0.9)
    })))

  it.effect("maxRejectionRate bounds the probability; 0 sends every call and only counts", () =>
    seeded(Effect.gen(function*() {
      for (const max of [0, 0.25, 0.5]) {
        const throttle = yield* AdaptiveThrottle.make({ maxRejectionRate: max })
        const { reached, rejected } = yield* drive(throttle, "a", 400, () => Effect.fail("503"))
        expect(yield* throttle.probability("a")).toBe(max)
        if (max === 0) expect(rejected).toBe(0)
        expect(reached).toBeGreaterThanOrEqual(400 * (1 - max) - 60)
      }
    })))

  it.effect("a local rejection is a typed error naming the key, and the effect never runs", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ maxRejectionRate: 1 })
      yield* drive(throttle, "api.example.com", 200, () => Effect.fail("503"))
      let ran = 0
      const errors = yield* Effect.forEach(
        Array.from({ length: 20 }),
        () =>
          Effect.flip(
            throttle.protect(Effect.sync(() => ran++).pipe(Effect.andThen(Effect.fail("503"))), "api.example.com")
          )
      )
      const local = errors.filter(isLocal)
      expect(local.length).toBeGreaterThan(15)
      expect(ran).toBe(20 - local.length)
      const first = local[0]!
      expect(first.key).toBe("api.example.com")
      expect(first.probability).toBeGreaterThan(0.9)
    })))

  it.effect("sends about k times what an overloaded backend accepts", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ k: 2 })
      let sent = 0
      let ok = 0
      let lastAccepted = -1
      // ten calls are offered per 100 ms; the backend has room for one per 100 ms and refuses the rest
      const result = yield* drive(throttle, "b", 2_000, () =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          sent++
          if (now === lastAccepted) return Effect.fail("503")
          lastAccepted = now
          ok++
          return Effect.void
        }))
      expect(result.reached).toBe(sent)
      expect(result.reached + result.rejected).toBe(2_000)
      // unthrottled, all 2,000 would be sent for 200 accepted; throttled, the client sends about k = 2 per accept
      expect(ok).toBeGreaterThan(150)
      expect(sent / ok).toBeGreaterThan(1.5)
      expect(sent / ok).toBeLessThan(3)
    })))

  it.effect("forgets an outage once it has left the window", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ window: "1 minute", buckets: 60 })
      yield* drive(throttle, "a", 100, () => Effect.fail("503"))
      expect(yield* throttle.probability("a")).toBe(0.9)
      yield* TestClock.adjust("1 minute")
      expect(yield* throttle.probability("a")).toBe(0)
    })))

  it.effect("keys are independent, and isAccepted decides what counts as accepted", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({
        isAccepted: (exit) => Exit.isSuccess(exit) || Exit.isFailure(exit)
      })
      yield* drive(throttle, "a", 200, () => Effect.fail("404"))
      expect(yield* throttle.probability("a")).toBe(0)

      const plain = yield* AdaptiveThrottle.make()
      yield* drive(plain, "down", 200, () => Effect.fail("503"))
      expect(yield* plain.probability("down")).toBe(0.9)
      expect(yield* plain.probability("up")).toBe(0)
      const { rejected } = yield* drive(plain, "up", 100, () => Effect.void)
      expect(rejected).toBe(0)
    })))

  it.effect("tracks at most maxKeys keys, forgetting the least recently used", () =>
    seeded(Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ maxKeys: 2 })
      yield* drive(throttle, "a", 50, () => Effect.fail("503"))
      yield* drive(throttle, "b", 50, () => Effect.fail("503"))
      yield* drive(throttle, "a", 1, () => Effect.fail("503"))
      yield* drive(throttle, "c", 1, () => Effect.void)
      expect(yield* throttle.probability("a")).toBe(0.9)
      expect(yield* throttle.probability("b")).toBe(0)
    })))

  it("refuses options that could never work, when called", () => {
    expect(() => AdaptiveThrottle.make({ k: 0.5 })).toThrow(/k must be/)
    expect(() => AdaptiveThrottle.make({ window: 0 })).toThrow(/window/)
    expect(() => AdaptiveThrottle.make({ buckets: 0 })).toThrow(/buckets/)
    expect(() => AdaptiveThrottle.make({ maxKeys: 1.5 })).toThrow(/maxKeys/)
    expect(() => AdaptiveThrottle.make({ maxRejectionRate: -0.1 })).toThrow(/maxRejectionRate/)
    expect(() => AdaptiveThrottle.make({ maxRejectionRate: 1.5 })).toThrow(/maxRejectionRate/)
    expect(() => AdaptiveThrottle.make({ maxRejectionRate: Number.NaN })).toThrow(/maxRejectionRate/)
  })
})
