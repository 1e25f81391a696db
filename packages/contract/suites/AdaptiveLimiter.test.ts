import { failureOption, fork, gaugeValue, provideScope, scoped, settle, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Queue, Scope } from "effect"
import { AdaptiveLimiter, Criticality, Deadline } from "effect-resilience"

/**
 * `n` calls at once, each taking `ms` on the clock, run to the end; returns the exits. Forked one after the other
 * by this fiber (they start when it yields): Effect 4 interrupts a child fiber when the fiber that forked it ends.
 */
const wave = (limiter: AdaptiveLimiter.AdaptiveLimiter, n: number, ms: number) =>
  Effect.gen(function*() {
    const fibers = yield* Effect.forEach(
      Array.from({ length: n }),
      () => fork(limiter.protect(Effect.sleep(Duration.millis(ms))))
    )
    yield* settle
    yield* TestClock.adjust(Duration.millis(ms))
    return yield* Effect.forEach(fibers, Fiber.await)
  })

/** One call alone, taking `ms` on the clock (failing with `AttemptTimeout` when `overload`). */
const alone = (limiter: AdaptiveLimiter.AdaptiveLimiter, ms: number, overload = false) =>
  Effect.gen(function*() {
    const call = overload
      ? Effect.andThen(
        Effect.sleep(Duration.millis(ms)),
        Effect.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(ms) }))
      )
      : Effect.sleep(Duration.millis(ms))
    const fiber = yield* fork(limiter.protect(call))
    yield* settle
    yield* TestClock.adjust(Duration.millis(ms))
    return yield* Fiber.await(fiber)
  })

const limitOf = (name: string) => gaugeValue(AdaptiveLimiter.limitGauge, { limiter: name })

describe("AdaptiveLimiter", () => {
  scoped(
    "LimitExceeded keeps Error's name (loggers print it); the limiter's own name is `limiter`",
    () =>
      Effect.gen(function*() {
        for (const name of ["api", undefined]) {
          const limiter = yield* AdaptiveLimiter.make({
            algorithm: AdaptiveLimiter.aimd(),
            initialLimit: 1,
            minLimit: 1,
            ...(name === undefined ? {} : { name })
          })
          const gate = yield* Deferred.make<void>()
          const holder = yield* fork(limiter.protect(Deferred.await(gate)))
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
      })
  )

  scoped(
    "runs at most `limit` calls at once and refuses the rest when there is no queue",
    () =>
      Effect.gen(function*() {
        const limiter = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.aimd(), initialLimit: 2, minLimit: 1 })
        const gate = yield* Deferred.make<void>()
        const running = yield* Effect.forEach([1, 2], () => fork(limiter.protect(Deferred.await(gate))))
        yield* settle
        expect(yield* limiter.stats).toEqual({ limit: 2, inflight: 2, queued: 0 })
        const refused = yield* Effect.flip(limiter.protect(Effect.void))
        expect(refused._tag).toBe("LimitExceeded")
        expect(refused.reason).toBe("queue-full")
        expect(refused.limit).toBe(2)
        yield* Deferred.succeed(gate, undefined)
        yield* Effect.forEach(running, Fiber.join)
        expect((yield* limiter.stats).inflight).toBe(0)
      })
  )

  scoped(
    "AIMD: grows while the slots are used and calls succeed, shrinks on timeouts, ignores other errors",
    () =>
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
          fork,
          Effect.tap(() => settle),
          Effect.tap(() => TestClock.adjust("50 millis")),
          Effect.flatMap(Fiber.await)
        )
        expect(Exit.isFailure(timedOut)).toBe(true)
        expect(yield* limiter.limit).toBe(Math.floor(grown / 2))
      })
  )

  scoped("an idle caller never talks the limit up", () =>
    Effect.gen(function*() {
      const algorithms = [
        AdaptiveLimiter.aimd(),
        AdaptiveLimiter.vegas(),
        AdaptiveLimiter.windowedVegas(),
        AdaptiveLimiter.gradient2(),
        AdaptiveLimiter.windowed(AdaptiveLimiter.vegas(), { minWindowTime: "100 millis", maxWindowTime: "100 millis" })
      ]
      for (const algorithm of algorithms) {
        const limiter = yield* AdaptiveLimiter.make({ algorithm, initialLimit: 10 })
        for (let i = 0; i < 40; i++) yield* wave(limiter, 1, 10)
        expect(yield* limiter.limit).toBeLessThanOrEqual(10)
      }
    }))

  scoped("Gradient2: the limit falls when latency climbs under the same load", () =>
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

  scoped("queues first-in-first-out and fails a waiter after queueTimeout", () =>
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
      const first = yield* fork(limiter.protect(Deferred.await(gate)))
      yield* settle
      const waiters = yield* Effect.forEach(
        [1, 2],
        (i) => fork(limiter.protect(Effect.sync(() => order.push(i)))).pipe(Effect.tap(() => settle))
      )
      expect((yield* Effect.flip(limiter.protect(Effect.void))).reason).toBe("queue-full")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Effect.forEach(waiters, Fiber.join)
      expect(order).toEqual([1, 2])

      const blocker = yield* fork(limiter.protect(Effect.never))
      yield* settle
      const waiting = yield* fork(limiter.protect(Effect.void))
      yield* settle
      yield* TestClock.adjust("100 millis")
      const exit = yield* Fiber.await(waiting)
      expect(Exit.isFailure(exit) && failureOption(exit.cause).pipe((o) => o._tag === "Some" && o.value.reason))
        .toBe("queue-timeout")
      yield* Fiber.interrupt(blocker)
      expect(yield* limiter.stats).toEqual({ limit: 1, inflight: 0, queued: 0 })
    }))

  scoped("when the limit grows, every slot it adds goes to a waiter", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        initialLimit: 1,
        maxLimit: 10,
        maxQueue: 10
      })
      const gate = yield* Deferred.make<void>()
      // one call completes quickly with the slot in use: AIMD adds one slot
      const first = yield* fork(limiter.protect(Effect.sleep("10 millis")))
      yield* settle
      const waiters = yield* Effect.forEach([1, 2, 3], () => fork(limiter.protect(Deferred.await(gate))))
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
        provideScope(scope)
      )
      const gate = yield* Deferred.make<void>()
      const running = yield* fork(limiter.protect(Effect.as(Deferred.await(gate), "done")))
      yield* settle
      const waiting = yield* fork(limiter.protect(Effect.void))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      expect((yield* Effect.flip(Fiber.join(waiting))).reason).toBe("closed")
      expect((yield* Effect.flip(limiter.protect(Effect.void))).reason).toBe("closed")
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(running)).toBe("done")
    }))

  scoped("with shares, keeps the top of the limit for more critical calls", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        initialLimit: 10,
        maxLimit: 10,
        shares: { default: 0.9, sheddable: 0.7 }
      })
      const gate = yield* Deferred.make<void>()
      const hold = (level: Criticality.Criticality) =>
        limiter.protect(Deferred.await(gate)).pipe(Criticality.withCriticality(level), fork)
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
        () => plain.protect(Deferred.await(gate2)).pipe(Criticality.withCriticality("sheddable"), fork)
      )
      yield* settle
      expect((yield* plain.stats).inflight).toBe(2)
      yield* Deferred.succeed(gate2, undefined)
      yield* Effect.forEach(both, Fiber.join)
    }))

  scoped(
    "the default initial limit lies within the bounds; fast overloads still move the windowed Vegas",
    () =>
      Effect.gen(function*() {
        const high = yield* AdaptiveLimiter.make({ minLimit: 50 })
        expect(yield* high.limit).toBe(50)
        const low = yield* AdaptiveLimiter.make({ maxLimit: 5 })
        expect(yield* low.limit).toBe(5)
        // calls that take no time at all on the clock: overloads must still shrink the windowed Vegas's limit; Netflix's
        // per-call Vegas refuses an RTT of zero (it throws), so it does not move
        const instantOverloads = (algorithm: AdaptiveLimiter.Algorithm) =>
          Effect.gen(function*() {
            const limiter = yield* AdaptiveLimiter.make({ algorithm, initialLimit: 10, minLimit: 1 })
            for (let i = 0; i < 20; i++) {
              yield* limiter.protect(Effect.fail(new Deadline.AttemptTimeout({ timeout: Duration.zero }))).pipe(
                Effect.ignore
              )
            }
            return yield* limiter.limit
          })
        expect(yield* instantOverloads(AdaptiveLimiter.windowedVegas())).toBeLessThan(10)
        expect(yield* instantOverloads(AdaptiveLimiter.vegas())).toBe(10)
      })
  )

  scoped(
    "vegas() is Netflix's VegasLimit, per call: +beta with no queue, −log10(limit) past beta or on a drop",
    () =>
      Effect.gen(function*() {
        const limiter = yield* AdaptiveLimiter.make({
          algorithm: AdaptiveLimiter.vegas(),
          initialLimit: 2,
          maxLimit: 20
        })
        const limits: Array<number> = []
        const note = Effect.flatMap(limiter.limit, (l) => Effect.sync(() => limits.push(l)))
        // the first call is the no-load RTT; the second found no queue: + beta × log10 = 6; the third used fewer than
        // half the slots: nothing
        for (let i = 0; i < 3; i++) yield* Effect.andThen(alone(limiter, 10), note)
        // 8 at once, 5 times slower: ceil(8 × (1 − 10/50)) = 7 queued > beta: − 1, and then 6 queued: within [3, 6]
        yield* Effect.andThen(wave(limiter, 8, 50), note)
        // an overload takes log10 off whatever the slots in use
        yield* Effect.andThen(alone(limiter, 50, true), note)
        // an instant call is no sample (Netflix refuses an RTT of zero)
        yield* Effect.andThen(limiter.protect(Effect.void), note)
        expect(limits).toEqual([2, 8, 8, 7, 6, 6])
      })
  )

  scoped(
    "windowed(vegas()) is Netflix's WindowedLimit: the limit moves once per second of calls",
    () =>
      Effect.gen(function*() {
        const limiter = yield* AdaptiveLimiter.make({
          algorithm: AdaptiveLimiter.windowed(AdaptiveLimiter.vegas()),
          initialLimit: 10,
          maxLimit: 100
        })
        // a wave of 10 calls of 10 ms every 100 ms. The first call closes the first window (too few calls: dropped);
        // the window that closes after a second tells Vegas its no-load RTT; the next, a second later, no queue: + 6
        const limits: Array<number> = []
        for (let i = 0; i < 34; i++) {
          yield* wave(limiter, 10, 10)
          limits.push(yield* limiter.limit)
          yield* TestClock.adjust("90 millis")
        }
        expect(limits.indexOf(16)).toBe(22)
        expect(limits.indexOf(22)).toBe(33)
        expect(new Set(limits)).toEqual(new Set([10, 16, 22]))
        // per call, the second call already grows it
        const perCall = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.vegas(), initialLimit: 10 })
        yield* wave(perCall, 10, 10)
        expect(yield* perCall.limit).toBeGreaterThan(10)
      })
  )

  scoped(
    "windowedVegas: an instant call is no RTT, so calls that take time after it still grow the limit",
    () =>
      Effect.gen(function*() {
        const limiter = yield* AdaptiveLimiter.make({ algorithm: AdaptiveLimiter.windowedVegas(), initialLimit: 20 })
        // no time passes on the TestClock: a coarse clock, or an answer from a cache
        yield* limiter.protect(Effect.void)
        const limits: Array<number> = []
        for (let i = 0; i < 4; i++) {
          yield* wave(limiter, yield* limiter.limit, 10)
          limits.push(yield* limiter.limit)
        }
        // a window of calls per wave; nothing queues, so it grows by half each time
        expect(limits).toEqual([30, 45, 67, 101])
      })
  )

  scoped(
    "windowedVegas: fast answers, one or mixed in, neither pin the limit nor let the line grow",
    () =>
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
              Effect.andThen(
                Effect.acquireUseRelease(
                  Queue.take(workers),
                  () => Effect.sleep("100 millis"),
                  () => Queue.offer(workers, undefined)
                )
              ),
              Effect.ensuring(Effect.sync(() => inLine--)),
              Effect.tap(() => Effect.sync(() => orders++))
            )
            const fast = Effect.sleep("5 millis") // a 400, a 404: no worker needed
            const next = Effect.suspend(() => {
              const i = calls++
              return Math.floor((i + 1) * fastShare) > Math.floor(i * fastShare) ? fast : order
            })
            if (oneFirst) yield* limiter.protect(fast).pipe(fork, Effect.tap(() => TestClock.adjust("5 millis")))
            const lane = limiter.protect(next).pipe(
              Effect.catchTag("LimitExceeded", () => Effect.sleep("100 millis")),
              Effect.forever
            )
            const lanes = yield* Effect.forEach(Array.from({ length: 16 }), () => fork(lane))
            yield* TestClock.adjust("2 seconds")
            const before = orders
            longest = 0
            yield* TestClock.adjust("1 second")
            // all at once: a lane waiting for a worker (an uninterruptible acquire) ends when another gives one back
            yield* Fiber.interruptAll(lanes)
            return { perSecond: orders - before, longest }
          })
        // the middleware's thresholds with its former rare probes and with its default ones, and the defaults
        const shedding = AdaptiveLimiter.windowedVegas({ alpha: 2, beta: 4, probeMultiplier: 1_000 })
        const cases = [
          [shedding, 0, true],
          [AdaptiveLimiter.windowedVegas({ alpha: 2, beta: 4 }), 0.05, false],
          [AdaptiveLimiter.windowedVegas(), 0.3, false]
        ] as const
        for (const [i, [algorithm, fastShare, oneFirst]] of cases.entries()) {
          const { longest, perSecond } = yield* served(algorithm, fastShare, oneFirst)
          // the workers busy, and no more queued than beta
          expect({ i, busy: perSecond >= 0.9 * 80, short: longest <= 6 }).toEqual({ i, busy: true, short: true })
        }
      })
  )

  it("refuses options that could never work, when called", () => {
    expect(() => AdaptiveLimiter.make({ minLimit: 10, maxLimit: 5 })).toThrow(/minLimit <= initialLimit <= maxLimit/)
    expect(() => AdaptiveLimiter.make({ maxQueue: -1 })).toThrow(/maxQueue/)
    expect(() => AdaptiveLimiter.make({ minLimit: 0 })).toThrow(/minLimit/)
    expect(() => AdaptiveLimiter.aimd({ backoffRatio: 1 })).toThrow(/backoffRatio/)
    expect(() => AdaptiveLimiter.gradient2({ rttTolerance: 0.5 })).toThrow(/rttTolerance/)
    expect(() => AdaptiveLimiter.vegas({ smoothing: 0 })).toThrow(/smoothing/)
    expect(() => AdaptiveLimiter.vegas({ alpha: 2, beta: 2 })).toThrow(/alpha < beta/)
    expect(() => AdaptiveLimiter.windowedVegas({ alpha: 0 })).toThrow(/alpha < beta/)
    expect(() => AdaptiveLimiter.make({ shares: { sheddable: 1.5 } })).toThrow(/shares.sheddable/)
    expect(() => AdaptiveLimiter.aimd({ timeout: 0 })).toThrow(/timeout/)
    const vegas = AdaptiveLimiter.vegas()
    expect(() => AdaptiveLimiter.windowed(vegas, { minWindowTime: "50 millis" })).toThrow(/minWindowTime/)
    expect(() => AdaptiveLimiter.windowed(vegas, { minWindowTime: "2 seconds" })).toThrow(/minWindowTime <= max/)
    expect(() => AdaptiveLimiter.windowed(vegas, { windowSize: 9 })).toThrow(/windowSize/)
    expect(() => AdaptiveLimiter.windowed(vegas, { sample: { percentile: 1 } })).toThrow(/percentile/)
    expect(() => AdaptiveLimiter.windowed(vegas, { sample: { percentile: 0.5, capacity: 5 } })).toThrow(/capacity/)
    expect(() => AdaptiveLimiter.windowed(vegas, { sample: { trimmedMean: 0.5 } })).toThrow(/trimmedMean/)
    expect(() => AdaptiveLimiter.windowed(AdaptiveLimiter.windowed(vegas))).toThrow(/another windowed/)
  })
})
