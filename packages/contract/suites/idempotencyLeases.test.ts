import { fiberLocal, fork, Leases, TestClock, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber } from "effect"

/** A claim's renewals, as the middleware's renew effect sees them: the TestClock times at which it ran. */
const claim = (owned: (n: number) => boolean = () => true) => {
  const at: Array<number> = []
  const renew = Effect.map(Clock.currentTimeMillis, (now) => {
    at.push(now)
    return owned(at.length)
  })
  return { at, renew }
}

/** Runs `leases.renewing(renew, wait for gate)` in a fiber; `open` ends it. */
const holding = (leases: Leases, renew: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<void>()
    const fiber = yield* fork(leases.renewing(renew, Deferred.await(gate)))
    yield* yieldNow
    return { fiber, open: Effect.andThen(Deferred.succeed(gate, undefined), Fiber.join(fiber)) }
  })

const seconds = (n: number) => Effect.forEach(Array.from({ length: n }), () => TestClock.adjust("1 second"))

describe("idempotency lease renewals (one fiber for all claims)", () => {
  it.effect("renew each claim a period after it joined, then a period after each renewal, until it ends", () =>
    Effect.gen(function*() {
      const leases = new Leases(3000)
      const a = claim()
      const first = yield* holding(leases, a.renew)
      yield* TestClock.adjust("1 second")
      const b = claim()
      const second = yield* holding(leases, b.renew)
      yield* seconds(8)
      expect(a.at).toEqual([3000, 6000, 9000])
      expect(b.at).toEqual([4000, 7000])
      yield* first.open
      yield* seconds(6)
      expect(a.at).toEqual([3000, 6000, 9000])
      expect(b.at).toEqual([4000, 7000, 10000, 13000])
      yield* second.open
      yield* seconds(10)
      expect(b.at).toEqual([4000, 7000, 10000, 13000])
    }))

  it.effect("stop renewing a claim the store says is lost; the others go on", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const lost = claim((n) => n < 2)
      const kept = claim()
      yield* holding(leases, lost.renew)
      yield* holding(leases, kept.renew)
      yield* seconds(5)
      expect(lost.at).toEqual([1000, 2000])
      expect(kept.at).toEqual([1000, 2000, 3000, 4000, 5000])
    }))

  it.effect("a handler that ends before its first renewal is never renewed, and a later one still is", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const quick = claim()
      yield* leases.renewing(quick.renew, Effect.void)
      yield* seconds(3)
      expect(quick.at).toEqual([])
      // the renewing fiber ended with nothing to renew: the next claim starts it again
      const slow = claim()
      yield* holding(leases, slow.renew)
      yield* seconds(2)
      expect(slow.at).toEqual([4000, 5000])
    }))

  it.effect("quick handlers, one after another, start one renewing fiber, not one each", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const quick = claim()
      for (let i = 0; i < 50; i++) {
        yield* leases.renewing(quick.renew, Effect.void)
        yield* yieldNow // the renewing fiber runs, and finds nothing waiting
      }
      expect(leases.starts).toBe(1)
      // it ends a period later; a claim after that starts it again, on time
      yield* seconds(2)
      const slow = claim()
      yield* holding(leases, slow.renew)
      yield* seconds(2)
      expect(quick.at).toEqual([])
      expect(slow.at).toEqual([3000, 4000])
    }))

  it.effect("an interrupted handler's claim is not renewed", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const c = claim()
      const { fiber } = yield* holding(leases, c.renew)
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      yield* seconds(3)
      expect(c.at).toEqual([1000])
    }))

  it.effect("a renewal still running when its handler ends is not followed by another", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const renewing = yield* Deferred.make<void>()
      const answer = yield* Deferred.make<boolean>()
      let renewals = 0
      const renew = Effect.andThen(
        Effect.andThen(Effect.sync(() => renewals++), Deferred.succeed(renewing, undefined)),
        Deferred.await(answer)
      )
      const held = yield* holding(leases, renew)
      yield* TestClock.adjust("1 second")
      yield* Deferred.await(renewing)
      yield* held.open
      yield* Deferred.succeed(answer, true)
      yield* seconds(3)
      expect(renewals).toBe(1)
    }))

  it.effect("renewals run with the fiber-local values their handler had, as a fiber forked from it would", () =>
    Effect.gen(function*() {
      const leases = new Leases(1000)
      const tag = fiberLocal("test/idempotencyLeases/tag", "none")
      const seen: Array<string> = []
      const renew = Effect.map(tag.get, (v) => {
        seen.push(v)
        return true
      })
      const gate = yield* Deferred.make<void>()
      for (const name of ["a", "b"]) {
        yield* fork(tag.locally(name)(leases.renewing(renew, Deferred.await(gate))))
      }
      yield* yieldNow
      yield* seconds(2)
      expect(seen).toEqual(["a", "b", "a", "b"])
    }))
})
