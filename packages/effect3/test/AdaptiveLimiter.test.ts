import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Metric, Queue, Scope, TestClock } from "effect"
import { AdaptiveLimiter, Criticality, Deadline } from "../src/index.js"

/** Lets forked fibers run until they block. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

/** `n` calls at once, each taking `ms` on the clock, run to the end; returns the exits. */
const wave = (limiter: AdaptiveLimiter.AdaptiveLimiter, n: number, ms: number) =>
  Effect.gen(function*() {
    const fibers = yield* Effect.forEach(
      Array.from({ length: n }),
      () => Effect.fork(limiter.protect(Effect.sleep(Duration.millis(ms)))),
      { concurrency: "unbounded" }
    )
    yield* settle
    yield* TestClock.adjust(Duration.millis(ms))
    return yield* Effect.forEach(fibers, Fiber.await)
  })

const limitOf = (name: string) =>
  Metric.value(AdaptiveLimiter.limitGauge.pipe(Metric.tagged("limiter", name))).pipe(Effect.map((s) => s.value))

describe("AdaptiveLimiter", () => {
  it.scoped("LimitExceeded keeps Error's name (loggers print it); the limiter's own name is `limiter`", () =>
    Effect.gen(function*() {
      for (const name of ["api", undefined]) {
        const limiter = yield* AdaptiveLimiter.make({
          algorithm: AdaptiveLimiter.aimd(),
          initialLimit: 1,
          minLimit: 1,
          ...(name === undefined ? {} : { name })
        })
        const gate = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(limiter.protect(Deferred.await(gate)))
        yield* settle
        const error = yield* Effect.flip(limiter.protect(Effect.void))
        expect(error.name).toBe("LimitExceeded")
        expect(error.limiter).toBe(name)
        expect(error.message).toBe(
          `${name === undefined ? "adaptive limiter" : `adaptive limiter "${name}"`} is full: 1 running and 0 waiting`
        )
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(holder)
      }
    }))

  it.scoped("runs at most `limit` calls at once and refuses the rest when there is no queue", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.aimd(), initialLimit: 2, minLimit: 1 })
      const gate = yield* Deferred.make<void>()
      const running = yield* Effect.forEach([1, 2], () => Effect.fork(limiter.protect(Deferred.await(gate))))
      yield* settle
      expect(yield* limiter.stats).toEqual({ limit: 2, inflight: 2, queued: 0 })
      const refused = yield* Effect.flip(limiter.protect(Effect.void))
      expect(refused._tag).toBe("LimitExceeded")
      expect(refused.reason).toBe("queue-full")
      expect(refused.limit).toBe(2)
      yield* Deferred.succeed(gate, undefined)
      yield* Effect.forEach(running, Fiber.join)
      expect((yield* limiter.stats).inflight).toBe(0)
    }))

  it.scoped("AIMD: grows while the slots are used and calls succeed, shrinks on timeouts, ignores other errors", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd({ backoffRatio: 0.5 }),
        initialLimit: 4,
        maxLimit: 100,
        name: "aimd"
      })
      for (let i = 0; i < 3; i++) yield* wave(limiter, yield* limiter.limit, 10)
      const grown = yield* limiter.limit
      // each call that completes with at least half the slots taken adds one (in flight counts the calls started
      // before it in the wave, itself included)
      expect(grown).toBeGreaterThan(10)
      expect(yield* limitOf("aimd")).toBe(grown)

      yield* limiter.protect(Effect.fail("bad request")).pipe(Effect.ignore)
      expect(yield* limiter.limit).toBe(grown)

      const timedOut = yield* limiter.protect(Effect.never.pipe(Deadline.timeout("50 millis"))).pipe(
        Effect.fork,
        Effect.tap(() => settle),
        Effect.tap(() => TestClock.adjust("50 millis")),
        Effect.flatMap(Fiber.await)
      )
      expect(Exit.isFailure(timedOut)).toBe(true)
      expect(yield* limiter.limit).toBe(Math.floor(grown / 2))
    }))

  it.scoped("an idle caller never talks the limit up", () =>
    Effect.gen(function*() {
      for (const algorithm of [AdaptiveLimiter.aimd(), AdaptiveLimiter.vegas(), AdaptiveLimiter.gradient2()]) {
        const limiter = yield* AdaptiveLimiter.make({ algorithm, initialLimit: 10 })
        for (let i = 0; i < 20; i++) yield* wave(limiter, 1, 10)
        expect(yield* limiter.limit).toBeLessThanOrEqual(10)
      }
    }))

  it.scoped("Gradient2: the limit falls when latency climbs under the same load", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.gradient2({ smoothing: 0.5 }),
        initialLimit: 20,
        minLimit: 2,
        maxLimit: 60
      })
      for (let i = 0; i < 5; i++) yield* wave(limiter, yield* limiter.limit, 10)
      const fast = yield* limiter.limit
      for (let i = 0; i < 5; i++) yield* wave(limiter, yield* limiter.limit, 100)
      const slow = yield* limiter.limit
      expect(fast).toBeGreaterThan(20)
      expect(slow).toBeLessThan(fast / 2)
    }))

  it.scoped("queues first-in-first-out and fails a waiter after queueTimeout", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        initialLimit: 1,
        maxLimit: 1,
        maxQueue: 2,
        queueTimeout: "100 millis"
      })
      const gate = yield* Deferred.make<void>()
      const order: Array<number> = []
      const first = yield* Effect.fork(limiter.protect(Deferred.await(gate)))
      yield* settle
      const waiters = yield* Effect.forEach(
        [1, 2],
        (i) => Effect.fork(limiter.protect(Effect.sync(() => order.push(i)))).pipe(Effect.tap(() => settle))
      )
      expect((yield* Effect.flip(limiter.protect(Effect.void))).reason).toBe("queue-full")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Effect.forEach(waiters, Fiber.join)
      expect(order).toEqual([1, 2])

      const blocker = yield* Effect.fork(limiter.protect(Effect.never))
      yield* settle
      const waiting = yield* Effect.fork(limiter.protect(Effect.void))
      yield* settle
      yield* TestClock.adjust("100 millis")
      const exit = yield* Fiber.await(waiting)
      expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause).pipe((o) => o._tag === "Some" && o.value.reason))
        .toBe("queue-timeout")
      yield* Fiber.interrupt(blocker)
      expect(yield* limiter.stats).toEqual({ limit: 1, inflight: 0, queued: 0 })
    }))

  it.scoped("when the limit grows, every slot it adds goes to a waiter", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        initialLimit: 1,
        maxLimit: 10,
        maxQueue: 10
      })
      const gate = yield* Deferred.make<void>()
      // one call completes quickly with the slot in use: AIMD adds one slot
      const first = yield* Effect.fork(limiter.protect(Effect.sleep("10 millis")))
      yield* settle
      const waiters = yield* Effect.forEach([1, 2, 3], () => Effect.fork(limiter.protect(Deferred.await(gate))))
      yield* settle
      expect((yield* limiter.stats).queued).toBe(3)
      yield* TestClock.adjust("10 millis")
      yield* Fiber.join(first)
      yield* settle
      expect(yield* limiter.stats).toEqual({ limit: 2, inflight: 2, queued: 1 })
      yield* Deferred.succeed(gate, undefined)
      yield* Effect.forEach(waiters, Fiber.join)
    }))

  it.effect("closing the scope refuses the waiters and later calls; running calls finish", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const limiter = yield* AdaptiveLimiter.make({ initialLimit: 1, maxLimit: 1, maxQueue: 1 }).pipe(
        Scope.extend(scope)
      )
      const gate = yield* Deferred.make<void>()
      const running = yield* Effect.fork(limiter.protect(Effect.as(Deferred.await(gate), "done")))
      yield* settle
      const waiting = yield* Effect.fork(limiter.protect(Effect.void))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      expect((yield* Effect.flip(Fiber.join(waiting))).reason).toBe("closed")
      expect((yield* Effect.flip(limiter.protect(Effect.void))).reason).toBe("closed")
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(running)).toBe("done")
    }))

  it.scoped("with shares, keeps the top of the limit for more critical calls", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        initialLimit: 10,
        maxLimit: 10,
        shares: { default: 0.9, sheddable: 0.7 }
      })
      const gate = yield* Deferred.make<void>()
      const hold = (level: Criticality.Criticality) =>
        limiter.protect(Deferred.await(gate)).pipe(Criticality.withCriticality(level), Effect.fork)
      const reasonOf = (level: Criticality.Criticality) =>
        limiter.protect(Effect.void).pipe(
          Criticality.withCriticality(level),
          Effect.flip,
          Effect.map((e) => e.reason)
        )
      const held = yield* Effect.forEach(Array.from({ length: 7 }), () => hold("sheddable"))
      yield* settle
      expect((yield* limiter.stats).inflight).toBe(7)
      expect(yield* reasonOf("sheddable")).toBe("shed")
      held.push(yield* hold("default"), yield* hold("default"))
      yield* settle
      expect((yield* limiter.stats).inflight).toBe(9)
      expect(yield* reasonOf("default")).toBe("shed")
      held.push(yield* hold("critical"))
      yield* settle
      expect((yield* limiter.stats).inflight).toBe(10)
      expect(yield* reasonOf("critical")).toBe("queue-full")
      yield* Deferred.succeed(gate, undefined)
      yield* Effect.forEach(held, Fiber.join)
      // without shares, every criticality may use the whole limit
      const plain = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.aimd(), initialLimit: 2, maxLimit: 2 })
      const gate2 = yield* Deferred.make<void>()
      const both = yield* Effect.forEach(
        [1, 2],
        () => plain.protect(Deferred.await(gate2)).pipe(Criticality.withCriticality("sheddable"), Effect.fork)
      )
      yield* settle
      expect((yield* plain.stats).inflight).toBe(2)
      yield* Deferred.succeed(gate2, undefined)
      yield* Effect.forEach(both, Fiber.join)
    }))

  it.scoped("the default initial limit lies within the bounds; fast calls still move Vegas", () =>
    Effect.gen(function*() {
      const high = yield* AdaptiveLimiter.make({ minLimit: 50 })
      expect(yield* high.limit).toBe(50)
      const low = yield* AdaptiveLimiter.make({ maxLimit: 5 })
      expect(yield* low.limit).toBe(5)
      // calls that take no time at all on the clock: overloads must still shrink a Vegas limit
      const vegas = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.vegas(), initialLimit: 10, minLimit: 1 })
      for (let i = 0; i < 20; i++) {
        yield* vegas.protect(Effect.fail(new Deadline.AttemptTimeout({ timeout: Duration.zero }))).pipe(Effect.ignore)
      }
      expect(yield* vegas.limit).toBeLessThan(10)
    }))

  it.scoped("Vegas: an instant call is no RTT, so calls that take time after it still grow the limit", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.vegas(), initialLimit: 20 })
      // no time passes on the TestClock: a coarse clock, or an answer from a cache
      yield* limiter.protect(Effect.void)
      const limits: Array<number> = []
      for (let i = 0; i < 4; i++) {
        yield* wave(limiter, yield* limiter.limit, 10)
        limits.push(yield* limiter.limit)
      }
      // a window of calls per wave; nothing queues, so it grows by half each time
      expect(limits).toEqual([30, 45, 67, 101])
    }))

  it.scoped("Vegas: fast answers, one or mixed in, neither pin the limit nor let the line grow", () =>
    Effect.gen(function*() {
      // 8 workers of 100 ms: 80 calls a second; 16 callers that ask again 100 ms after a refusal
      const served = (algorithm: AdaptiveLimiter.Algorithm, fastShare: number, oneFirst: boolean) =>
        Effect.gen(function*() {
          const limiter = yield* AdaptiveLimiter.make({ algorithm, initialLimit: 4 })
          // workers handed out first come, first served (a semaphore lets a newcomer take a freed permit first)
          const workers = yield* Queue.unbounded<void>()
          yield* Queue.offerAll(workers, Array.from({ length: 8 }, () => undefined))
          let orders = 0
          let calls = 0
          let inLine = 0
          let longest = 0
          const order = Effect.sync(() => (longest = Math.max(longest, ++inLine - 8))).pipe(
            Effect.zipRight(
              Effect.acquireUseRelease(
                Queue.take(workers),
                () => Effect.sleep("100 millis"),
                () => Queue.offer(workers, undefined)
              )
            ),
            Effect.ensuring(Effect.sync(() => inLine--)),
            Effect.tap(() => orders++)
          )
          const fast = Effect.sleep("5 millis") // a 400, a 404: no worker needed
          const next = Effect.suspend(() => {
            const i = calls++
            return Math.floor((i + 1) * fastShare) > Math.floor(i * fastShare) ? fast : order
          })
          if (oneFirst) yield* limiter.protect(fast).pipe(Effect.fork, Effect.tap(() => TestClock.adjust("5 millis")))
          const lane = limiter.protect(next).pipe(
            Effect.catchTag("LimitExceeded", () => Effect.sleep("100 millis")),
            Effect.forever
          )
          const lanes = yield* Effect.forEach(Array.from({ length: 16 }), () => Effect.fork(lane))
          yield* TestClock.adjust("2 seconds")
          const before = orders
          longest = 0
          yield* TestClock.adjust("1 second")
          yield* Effect.forEach(lanes, Fiber.interrupt)
          return { perSecond: orders - before, longest }
        })
      // the middleware's thresholds with its former rare probes and with its default ones, and the defaults
      const shedding = AdaptiveLimiter.vegas({ alpha: 2, beta: 4, probeMultiplier: 1_000 })
      const cases = [
        [shedding, 0, true],
        [AdaptiveLimiter.vegas({ alpha: 2, beta: 4 }), 0.05, false],
        [AdaptiveLimiter.vegas(), 0.3, false]
      ] as const
      for (const [i, [algorithm, fastShare, oneFirst]] of cases.entries()) {
        const { longest, perSecond } = yield* served(algorithm, fastShare, oneFirst)
        // the workers busy, and no more queued than beta
        expect({ i, busy: perSecond >= 0.9 * 80, short: longest <= 6 }).toEqual({ i, busy: true, short: true })
      }
    }))

  it("refuses options that could never work, when called", () => {
    expect(() => AdaptiveLimiter.make({ minLimit: 10, maxLimit: 5 })).toThrow(/minLimit <= initialLimit <= maxLimit/)
    expect(() => AdaptiveLimiter.make({ maxQueue: -1 })).toThrow(/maxQueue/)
    expect(() => AdaptiveLimiter.make({ minLimit: 0 })).toThrow(/minLimit/)
    expect(() => AdaptiveLimiter.aimd({ backoffRatio: 1 })).toThrow(/backoffRatio/)
    expect(() => AdaptiveLimiter.gradient2({ rttTolerance: 0.5 })).toThrow(/rttTolerance/)
    expect(() => AdaptiveLimiter.vegas({ smoothing: 0 })).toThrow(/smoothing/)
    expect(() => AdaptiveLimiter.vegas({ alpha: 2, beta: 2 })).toThrow(/alpha < beta/)
    expect(() => AdaptiveLimiter.vegas({ alpha: 0 })).toThrow(/alpha < beta/)
    expect(() => AdaptiveLimiter.make({ shares: { sheddable: 1.5 } })).toThrow(/shares.sheddable/)
    expect(() => AdaptiveLimiter.aimd({ timeout: 0 })).toThrow(/timeout/)
  })
})
