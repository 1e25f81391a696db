import {
  counterValue,
  diedOf,
  fc,
  fork,
  type Forked,
  gaugeValue,
  pollUnsafe,
  provideScope,
  scoped,
  Tag,
  TestClock,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { Bulkhead } from "effect-resilience"

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 20 })

/** Tracks how many calls run at once. */
const tracker = () => {
  let running = 0
  let peak = 0
  const track = <A, E, R>(self: Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        running++
        peak = Math.max(peak, running)
      }),
      () => self,
      () => Effect.sync(() => running--)
    )
  return { track, peak: () => peak, running: () => running }
}

const rejectionsOf = (name: string, reason: Bulkhead.RejectionReason) =>
  counterValue(Bulkhead.rejectionsTotal, { bulkhead: name, reason })

const activeOf = (name: string) => gaugeValue(Bulkhead.activeGauge, { bulkhead: name })

const queuedOf = (name: string) => gaugeValue(Bulkhead.queuedGauge, { bulkhead: name })

describe("Bulkhead", () => {
  scoped(
    "BulkheadFull keeps Error's name (loggers print it); the bulkhead's own name is `bulkhead`",
    () =>
      Effect.gen(function*() {
        for (const name of ["db", undefined]) {
          const bulkhead = yield* Bulkhead.make({
            maxConcurrent: 1,
            maxQueue: 0,
            ...(name === undefined ? {} : { name })
          })
          const gate = yield* Deferred.make<void>()
          const holder = yield* fork(bulkhead.protect(Deferred.await(gate)))
          yield* settle
          const error = yield* Effect.flip(bulkhead.protect(Effect.void))
          expect(error.name).toBe("BulkheadFull")
          expect(error.bulkhead).toBe(name)
          expect(error.message).toBe(
            name === undefined
              ? "bulkhead is full: 1 running and 0 waiting"
              : `bulkhead "${name}" is full: 1 running and 0 waiting`
          )
          yield* Deferred.succeed(gate, undefined)
          yield* Fiber.join(holder)
        }
      })
  )

  scoped("runs at most maxConcurrent at once and queues the rest", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 2, maxQueue: 10 })
      const gate = yield* Deferred.make<void>()
      const t = tracker()
      const fibers = yield* Effect.forEach(
        [1, 2, 3, 4, 5],
        (i) => fork(bulkhead.protect(t.track(Effect.as(Deferred.await(gate), i))))
      )
      yield* settle
      expect(yield* bulkhead.stats).toEqual({ active: 2, queued: 3 })
      expect(t.running()).toBe(2)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.joinAll(fibers)).toEqual([1, 2, 3, 4, 5])
      expect(t.peak()).toBe(2)
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
    }))

  scoped("releases waiting callers strictly first-in-first-out", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 10 })
      const order: Array<number> = []
      const gates = yield* Effect.forEach([0, 1, 2, 3, 4, 5], () => Deferred.make<void>())
      const fibers: Array<Forked<void, Bulkhead.BulkheadFull>> = []
      for (const i of [0, 1, 2, 3, 4, 5]) {
        fibers.push(
          yield* fork(
            bulkhead.protect(Effect.andThen(Effect.sync(() => order.push(i)), Deferred.await(gates[i]!)))
          )
        )
        yield* settle
      }
      expect(order).toEqual([0])
      // finish them in an order unrelated to arrival: only the running one can finish
      for (const i of [0, 1, 2, 3, 4, 5]) {
        yield* Deferred.succeed(gates[i]!, undefined)
        yield* settle
      }
      yield* Fiber.joinAll(fibers)
      expect(order).toEqual([0, 1, 2, 3, 4, 5])
    }))

  scoped("fails at once with BulkheadFull beyond maxConcurrent + maxQueue", () =>
    Effect.gen(function*() {
      const name = "full-test"
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 2, maxQueue: 3, name })
      const gate = yield* Deferred.make<void>()
      const ran: Array<number> = []
      const fibers = yield* Effect.forEach(
        [1, 2, 3, 4, 5],
        (i) => fork(bulkhead.protect(Effect.andThen(Deferred.await(gate), Effect.sync(() => ran.push(i)))))
      )
      yield* settle
      const before = yield* rejectionsOf(name, "queue-full")
      const error = yield* Effect.flip(bulkhead.protect(Effect.sync(() => ran.push(6))))
      expect(error).toBeInstanceOf(Bulkhead.BulkheadFull)
      expect(error._tag).toBe("BulkheadFull")
      expect(error).toMatchObject({ reason: "queue-full", bulkhead: name, maxConcurrent: 2, maxQueue: 3 })
      expect(error.message).toContain("full-test")
      expect(yield* rejectionsOf(name, "queue-full")).toBe(before + 1)
      expect(yield* queuedOf(name)).toBe(3)
      expect(yield* activeOf(name)).toBe(2)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll(fibers)
      expect(ran.sort()).toEqual([1, 2, 3, 4, 5])
      expect(yield* queuedOf(name)).toBe(0)
      expect(yield* activeOf(name)).toBe(0)
    }))

  scoped("maxQueue 0 rejects as soon as every slot is taken", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 0 })
      yield* fork(bulkhead.protect(Effect.never))
      yield* settle
      const error = yield* Effect.flip(bulkhead.protect(Effect.void))
      expect(error.reason).toBe("queue-full")
    }))

  scoped("an interrupted waiter gives its queue place back", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 1 })
      const gate = yield* Deferred.make<void>()
      const holder = yield* fork(bulkhead.protect(Deferred.await(gate)))
      let waiterRan = false
      const waiter = yield* fork(bulkhead.protect(Effect.sync(() => (waiterRan = true))))
      yield* settle
      expect((yield* Effect.flip(bulkhead.protect(Effect.void))).reason).toBe("queue-full")
      yield* Fiber.interrupt(waiter)
      expect(yield* bulkhead.stats).toEqual({ active: 1, queued: 0 })
      const next = yield* fork(bulkhead.protect(Effect.succeed("next")))
      yield* settle
      expect(yield* bulkhead.stats).toEqual({ active: 1, queued: 1 })
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(yield* Fiber.join(next)).toBe("next")
      expect(waiterRan).toBe(false)
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
    }))

  scoped("an interrupted runner gives its slot back (to the next waiter)", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 1 })
      let finalized = false
      const runner = yield* fork(bulkhead.protect(Effect.onInterrupt(Effect.never, () =>
        Effect.sync(() => {
          finalized = true
        }))))
      yield* settle
      const waiter = yield* fork(bulkhead.protect(Effect.succeed("waiter")))
      yield* settle
      yield* Fiber.interrupt(runner)
      expect(finalized).toBe(true)
      expect(yield* Fiber.join(waiter)).toBe("waiter")
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
      // no leaked permit: both slots of the pool are usable again
      expect(yield* bulkhead.protect(Effect.succeed(1))).toBe(1)
    }))

  scoped("a defect or a failure in self gives the slot back", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 0 })
      const died = yield* Effect.exit(bulkhead.protect(Effect.die("boom")))
      expect(diedOf(died)).toBe(true)
      const failed = yield* Effect.exit(bulkhead.protect(Effect.fail("nope")))
      expect(failed).toEqual(Exit.fail("nope"))
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
      expect(yield* bulkhead.protect(Effect.succeed("ok"))).toBe("ok")
    }))

  scoped("a waiter that waits longer than queueTimeout fails with reason queue-timeout", () =>
    Effect.gen(function*() {
      const name = "timeout-test"
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 2, queueTimeout: "1 second", name })
      const gate = yield* Deferred.make<void>()
      const holder = yield* fork(bulkhead.protect(Deferred.await(gate)))
      yield* settle
      const waiter = yield* fork(bulkhead.protect(Effect.succeed("late")))
      yield* settle
      yield* TestClock.adjust("999 millis")
      expect(pollUnsafe(waiter)).toBeUndefined()
      const second = yield* fork(bulkhead.protect(Effect.succeed("second")))
      yield* settle
      yield* TestClock.adjust("1 milli")
      const error = yield* Effect.flip(Fiber.join(waiter))
      expect(error).toMatchObject({ _tag: "BulkheadFull", reason: "queue-timeout", bulkhead: name })
      expect(yield* rejectionsOf(name, "queue-timeout")).toBe(1)
      expect(yield* bulkhead.stats).toEqual({ active: 1, queued: 1 })
      // the second waiter, queued 1 ms later, still gets the slot in time
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(yield* Fiber.join(second)).toBe("second")
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
    }))

  scoped("closing the scope fails waiting callers and later calls with reason closed", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 5 }).pipe(provideScope(scope))
      const gate = yield* Deferred.make<void>()
      const running = yield* fork(bulkhead.protect(Effect.as(Deferred.await(gate), "done")))
      yield* settle
      const waiters = yield* Effect.forEach([1, 2], () => fork(bulkhead.protect(Effect.void)))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      for (const waiter of waiters) {
        expect((yield* Effect.flip(Fiber.join(waiter))).reason).toBe("closed")
      }
      expect((yield* Effect.flip(bulkhead.protect(Effect.void))).reason).toBe("closed")
      // a call already running finishes normally
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(running)).toBe("done")
      expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
    }))

  scoped("annotates the current span with the time spent queued, or the rejection", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 1 })
      const gate = yield* Deferred.make<void>()
      yield* fork(bulkhead.protect(Deferred.await(gate)))
      yield* settle
      const queued = yield* fork(
        bulkhead.protect(Effect.void).pipe(Effect.andThen(Effect.currentSpan), Effect.withSpan("queued"))
      )
      yield* settle
      const rejected = yield* bulkhead.protect(Effect.void).pipe(
        Effect.flip,
        Effect.andThen(Effect.currentSpan),
        Effect.withSpan("rejected")
      )
      expect(rejected.attributes.get("bulkhead.rejected")).toBe("queue-full")
      yield* TestClock.adjust("250 millis")
      yield* Deferred.succeed(gate, undefined)
      expect((yield* Fiber.join(queued)).attributes.get("bulkhead.queued_ms")).toBe(250)
    }))

  scoped("layer provides a bulkhead for a tag", () =>
    Effect.gen(function*() {
      const Db = Tag<"Db", Bulkhead.Bulkhead>("Db")
      const result = yield* Effect.flatMap(Db, (b) => b.protect(Effect.succeed(b.maxConcurrent))).pipe(
        Effect.provide(Bulkhead.layer(Db, { maxConcurrent: 3, maxQueue: 1 }))
      )
      expect(result).toBe(3)
    }))

  // live clock: nothing here waits for time, and the TestClock's list of pending sleeps (one per waiter with a
  // queueTimeout) would add its own cost
  it.live("a long queue of synchronous calls drains without growing the stack", () =>
    Effect.gen(function*() {
      // each released slot resumes the next waiter, and Effect 4 runs it on the releasing fiber's stack: every
      // waiter would finish inside the one before it (Effect 4's internal/resume.ts unwinds past a depth; without
      // it, 1,000 waiters overflowed)
      // with a queueTimeout, each wait runs in a fiber of Effect.timeoutOrElse's race, one more resume per level
      for (const [waiters, queueTimeout] of [[5_000, undefined], [5_000, "1 hour"]] as const) {
        const bulkhead = yield* Bulkhead.make({
          maxConcurrent: 1,
          maxQueue: waiters,
          ...(queueTimeout === undefined ? {} : { queueTimeout })
        })
        const gate = yield* Deferred.make<void>()
        const holder = yield* fork(bulkhead.protect(Deferred.await(gate)))
        yield* settle
        let ran = 0
        const queued = yield* Effect.forEach(
          Array.from({ length: waiters }),
          () => fork(bulkhead.protect(Effect.sync(() => ran++)))
        )
        yield* settle
        expect((yield* bulkhead.stats).queued).toBe(waiters)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(holder)
        yield* Fiber.joinAll(queued)
        expect(ran).toBe(waiters)
        expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
      }
    }).pipe(Effect.scoped), 60_000)

  it("rejects options that could never work", () => {
    expect(() => Bulkhead.make({ maxConcurrent: 0, maxQueue: 1 })).toThrow(/maxConcurrent/)
    expect(() => Bulkhead.make({ maxConcurrent: 1.5, maxQueue: 1 })).toThrow(/maxConcurrent/)
    expect(() => Bulkhead.make({ maxConcurrent: 1, maxQueue: -1 })).toThrow(/maxQueue/)
    expect(() => Bulkhead.make({ maxConcurrent: 1, maxQueue: NaN })).toThrow(/maxQueue/)
    expect(() => Bulkhead.make({ maxConcurrent: 1, maxQueue: 0, queueTimeout: -5 })).toThrow(/queueTimeout/)
    expect(() => Bulkhead.make({ maxConcurrent: 1, maxQueue: 0, queueTimeout: "1 second" })).not.toThrow()
  })

  // fast-check drives the samples (Effect 4's it.prop takes Schema/Arbitrary values); each sample runs in its own scope
  it("never runs more than maxConcurrent at once, for random arrivals, completions and interruptions", () =>
    fc.assert(
      fc.asyncProperty(
        fc.record({
          maxConcurrent: fc.integer({ min: 1, max: 4 }),
          maxQueue: fc.integer({ min: 0, max: 5 }),
          steps: fc.array(
            fc.oneof(
              fc.constant({ op: "arrive" as const, pick: 0 }),
              fc.record({ op: fc.constant("finish" as const), pick: fc.nat() }),
              fc.record({ op: fc.constant("interrupt" as const), pick: fc.nat() })
            ),
            { maxLength: 40 }
          )
        }),
        ({ maxConcurrent, maxQueue, steps }) =>
          Effect.runPromise(Effect.scoped(Effect.gen(function*() {
            const bulkhead = yield* Bulkhead.make({ maxConcurrent, maxQueue })
            const t = tracker()
            const calls: Array<{ gate: Deferred.Deferred<void>; fiber: Forked<void, Bulkhead.BulkheadFull> }> = []
            const started: Array<number> = []
            for (const step of steps) {
              if (step.op === "arrive") {
                const gate = yield* Deferred.make<void>()
                const id = calls.length
                const fiber = yield* fork(
                  bulkhead.protect(t.track(Effect.andThen(Effect.sync(() => started.push(id)), Deferred.await(gate))))
                    .pipe(Effect.catchTag("BulkheadFull", () => Effect.void))
                )
                calls.push({ gate, fiber })
              } else if (calls.length > 0) {
                const call = calls[step.pick % calls.length]!
                yield* step.op === "finish" ? Deferred.succeed(call.gate, undefined) : Fiber.interrupt(call.fiber)
              }
              yield* settle
              const stats = yield* bulkhead.stats
              expect(t.running()).toBeLessThanOrEqual(maxConcurrent)
              expect(stats.active).toBe(t.running())
              expect(stats.queued).toBeLessThanOrEqual(maxQueue)
            }
            yield* Effect.forEach(calls, (call) => Deferred.succeed(call.gate, undefined))
            yield* Fiber.awaitAll(calls.map((call) => call.fiber))
            expect(t.peak()).toBeLessThanOrEqual(maxConcurrent)
            // first in, first out: of the calls that ran, none started before one that arrived earlier
            expect(started).toEqual([...started].sort((a, b) => a - b))
            // no permit leaked: the bulkhead is empty and every slot can be taken again
            expect(yield* bulkhead.stats).toEqual({ active: 0, queued: 0 })
            yield* Effect.forEach(
              Array.from({ length: maxConcurrent }),
              () => fork(bulkhead.protect(Effect.never))
            )
            yield* settle
            expect((yield* bulkhead.stats).active).toBe(maxConcurrent)
          })))
      ),
      { numRuns: 100 }
    ))
})
