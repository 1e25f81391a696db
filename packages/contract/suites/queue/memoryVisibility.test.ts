/**
 * Issue 19 §3 item 8 under TestClock: a handler that never returns must not stop the consumer. Defaults
 * give every handler a time limit (the visibility timeout), a running handler's message is extended while it
 * runs (so a slow one is not run twice), closing ends within its grace, and a stale delivery can neither
 * extend nor acknowledge the message.
 */
import { type DurationInput, fork, pollFiber, provideScope, TestClock, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, type Fiber, Option, Scope } from "effect"
import { Consumer, QueueSource } from "effect-resilience"

/** The fiber's exit, if it has ended. */
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.sync(() => {
    const exit = pollFiber(fiber)
    return exit === undefined ? Option.none() : Option.some(exit)
  })

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 50 })

/** Advances the TestClock in steps until `done` holds; fails (never hangs) when it does not within `max` steps. */
const until = (done: Effect.Effect<boolean>, step: DurationInput = "10 millis", max = 2_000) =>
  Effect.gen(function*() {
    for (let i = 0; i < max; i++) {
      yield* settle
      if (yield* done) return
      yield* TestClock.adjust(step)
    }
    throw new Error("condition never held")
  })

const msg = (id: string) => ({ id, body: { n: 0 } })

describe("Consumer.run defaults: a hung handler does not stop the consumer (issue 19 item 8)", () => {
  it.effect("a hung poison message and 20 later ones: all 20 handled, the poison dead-lettered, close bounded", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 second" })
      const handled: Array<string> = []
      const poisonRuns: Array<number> = []
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          // no timeout, no shutdownGrace: the defaults
          handler: (m) =>
            m.id === "poison"
              ? Effect.andThen(Effect.sync(() => poisonRuns.push(m.receiveCount)), Effect.never)
              : Effect.sync(() => handled.push(m.id)),
          concurrency: 2,
          maxReceiveCount: 3
        })
      )
      yield* source.send([msg("poison")])
      yield* until(Effect.map(consumer.stats, (s) => s.handling === 1))
      // long enough for the poison to come back and take the second worker too, were nothing to stop it
      yield* TestClock.adjust("2500 millis")
      yield* source.send(Array.from({ length: 20 }, (_, i) => msg(`m${i}`)))
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 20 && s.deadLettered === 1), "100 millis", 300)
      expect(handled.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`).sort())
      expect(poisonRuns).toEqual([1, 2, 3])
      const dead = Option.getOrThrow(yield* source.deadLetters.inspect("poison"))
      expect(dead.receiveCount).toBe(3)
      expect(dead.reason).toBe(
        "received 3 times (maxReceiveCount 3); last error: DeadlineExceeded: the deadline passed before the operation finished"
      )
      // each delivery was cut at its time limit (the visibility timeout), not earlier
      expect(dead.deadLetteredAt - dead.firstSeenAt).toBeGreaterThanOrEqual(3_000)
      expect(yield* consumer.stats).toMatchObject({ released: 2, deadLettered: 1, processed: 20, handling: 0 })

      // a handler hangs when the scope closes: closing ends after the default grace (here the time limit, 1 s)
      yield* source.send([msg("poison")])
      yield* until(Effect.map(consumer.stats, (s) => s.handling === 1))
      const closing = yield* fork(Scope.close(scope, Exit.void))
      yield* until(Effect.map(poll(closing), Option.isSome), "100 millis", 11)
      expect(handled.length).toBe(20)
    }))

  it.effect("closing ends within shutdownGrace: hung handlers are interrupted, their messages not acknowledged", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 minute" })
      yield* source.send([msg("hung"), msg("stuck")])
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          // one that can be interrupted, one that cannot
          handler: (m) => m.id === "hung" ? Effect.never : Effect.uninterruptible(Effect.never),
          concurrency: 2,
          maxReceiveCount: 3
        })
      )
      yield* until(Effect.map(consumer.stats, (s) => s.handling === 2))
      const t0 = yield* Clock.currentTimeMillis
      const closing = yield* fork(Scope.close(scope, Exit.void))
      // default grace: the time limit (1 minute), at most 10 s; then 1 s for the interrupted to end
      const closedAfter = (millis: number) =>
        Effect.gen(function*() {
          yield* TestClock.adjust(millis)
          yield* settle
          return Option.isSome(yield* poll(closing))
        })
      expect(yield* closedAfter(9_999)).toBe(false)
      expect(yield* closedAfter(1)).toBe(false) // interrupted: "hung" ends, "stuck" cannot
      expect(yield* closedAfter(999)).toBe(false)
      expect(yield* closedAfter(1)).toBe(true) // abandoned
      expect((yield* Clock.currentTimeMillis) - t0).toBe(11_000)
      expect(yield* consumer.stats).toMatchObject({ processed: 0, abandoned: 1, handling: 1 })
      // neither was acknowledged: both come back after the visibility timeout, as suspects, and neither delivery
      // is charged: they ran beside each other (core/crashAttribution.ts)
      yield* TestClock.adjust("1 minute")
      const back = yield* source.receive(10)
      const seen = back.map((m) => [m.id, m.receiveCount, m.suspect]).sort()
      expect(seen).toEqual([["hung", 1, true], ["stuck", 1, true]])
    }))

  it.effect("a handler slower than the visibility timeout but within its limit runs once: renewed at 1/3 left", () =>
    Effect.gen(function*() {
      const base = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 second" })
      const extendedAt: Array<number> = []
      const source: QueueSource.QueueSource<{ readonly n: number }> = {
        ...base,
        extend: (m) =>
          Effect.andThen(
            Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => extendedAt.push(now))),
            base.extend!(m)
          )
      }
      const runs: Array<number> = []
      yield* source.send([msg("slow")])
      const t0 = yield* Clock.currentTimeMillis
      const consumer = yield* Consumer.run({
        source,
        handler: (m) => Effect.andThen(Effect.sync(() => runs.push(m.receiveCount)), Effect.sleep("3 seconds")),
        concurrency: 2, // a free worker would take a redelivery
        maxReceiveCount: 5,
        timeout: "10 seconds"
      })
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 1))
      expect(runs).toEqual([1])
      // a third of the second is 333 ms: each extension when that much is left, none at the start
      expect(extendedAt.map((at) => at - t0)).toEqual([667, 1334, 2001, 2668])
      expect(yield* consumer.stats).toMatchObject({ processed: 1, released: 0, extended: 4, abandoned: 0 })
    }).pipe(Effect.scoped))

  it.effect("a fast handler is never extended", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 second" })
      yield* source.send([msg("a"), msg("b")])
      const consumer = yield* Consumer.run({
        source,
        handler: () => Effect.sleep("600 millis"),
        concurrency: 2,
        maxReceiveCount: 5
      })
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 2))
      expect((yield* consumer.stats).extended).toBe(0)
    }).pipe(Effect.scoped))

  it("a time limit longer than the visibility timeout is refused for a source that cannot extend", () => {
    const memory = Effect.runSync(QueueSource.memory({ visibilityTimeout: "1 second" }))
    const { extend: _, ...withoutExtend } = memory
    const base = { handler: () => Effect.void, maxReceiveCount: 3 }
    expect(() => Consumer.run({ ...base, source: withoutExtend, timeout: "2 seconds" })).toThrow(
      /time limit \(timeout\) of 2000 ms is longer than the source's visibility timeout of 1000 ms/
    )
    // within the visibility timeout, or with a source that extends, it is accepted
    expect(() => Consumer.run({ ...base, source: withoutExtend, timeout: "1 second" })).not.toThrow()
    expect(() => Consumer.run({ ...base, source: memory, timeout: "1 minute" })).not.toThrow()
    expect(() => Consumer.run({ ...base, source: memory, shutdownGrace: -1 })).toThrow(/shutdownGrace/)
  })

  it.effect("Consumer.idempotentMemory is built once, as an effect: per message it does not compile", () =>
    Effect.gen(function*() {
      const applied: Array<string> = []
      const once = yield* Consumer.idempotentMemory((m: QueueSource.Message<unknown>) =>
        Effect.sync(() => applied.push(m.id))
      )
      const m = {
        id: "a",
        key: undefined,
        body: null,
        receiveCount: 1,
        enqueuedAt: 0,
        receivedAt: 0,
        lastError: undefined,
        receipt: "1:1"
      }
      yield* once(m)
      yield* once({ ...m, receiveCount: 2 })
      expect(applied).toEqual(["a"])
      const perMessage = (message: QueueSource.Message<unknown>) =>
        // @ts-expect-error: a store built inside the handler would remember nothing, so this is a type error
        Consumer.idempotentMemory(() => Effect.void)(message)
      expect(typeof perMessage).toBe("function")
    }))
})

describe("QueueSource.memory: extend, and fencing of a stale delivery", () => {
  it.effect("extend hides the message for one more visibility timeout from now, keeping its receive count", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 second" })
      yield* source.send([msg("a")])
      const [a] = yield* source.receive(1)
      yield* TestClock.adjust("900 millis")
      expect(yield* source.extend!(a!)).toBe(true)
      yield* TestClock.adjust("999 millis")
      expect(yield* source.receive(1)).toEqual([]) // the first timer (at 1 s) is stale
      yield* TestClock.adjust("1 millis")
      const [again] = yield* source.receive(1)
      expect(again).toMatchObject({ id: "a", receiveCount: 2 })
    }))

  it.effect("a stale owner can neither extend nor acknowledge the message's redelivery", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 second" })
      yield* source.send([msg("a")])
      const [stale] = yield* source.receive(1)
      yield* TestClock.adjust("1 second")
      const [current] = yield* source.receive(1)
      expect(current).toMatchObject({ id: "a", receiveCount: 2 })
      expect(yield* source.extend!(stale!)).toBe(false)
      expect(yield* source.ack(stale!)).toBe(false)
      expect(yield* source.release(stale!)).toBe(false)
      // the current delivery still holds it
      expect(yield* source.extend!(current!)).toBe(true)
      expect(yield* source.ack(current!)).toBe(true)
      expect(yield* source.ack(current!)).toBe(false)
      yield* TestClock.adjust("1 minute")
      expect(yield* source.receive(1)).toEqual([])
    }))
})
