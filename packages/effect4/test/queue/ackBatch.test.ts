import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { ackBatcher } from "../../src/internal/queue/ackBatch.js"

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

interface Call {
  readonly items: ReadonlyArray<number>
  readonly answer: Deferred.Deferred<boolean, string>
}

/** An engine whose calls are recorded and answered only when the test says so. */
const engine = Effect.sync(() => {
  const calls: Array<Call> = []
  const flush = (items: ReadonlyArray<number>) =>
    Effect.flatMap(Deferred.make<boolean, string>(), (answer) => {
      calls.push({ items, answer })
      // even items match, odd ones are stale
      return Effect.as(Deferred.await(answer), items.map((n) => n % 2 === 0))
    })
  return { calls, flush }
})

describe("ackBatcher", () => {
  it.effect("a lone ack goes at once; acks arriving meanwhile share the next call, at most `max` per call", () =>
    Effect.gen(function*() {
      const { calls, flush } = yield* engine
      const ack = ackBatcher(2, flush)
      const first = yield* Effect.forkChild(ack(0), { startImmediately: true })
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([[0]])
      const rest = yield* Effect.forEach([1, 2, 3], (n) => Effect.forkChild(ack(n), { startImmediately: true }))
      yield* settle
      expect(calls).toHaveLength(1) // the others wait for the call under way
      yield* Deferred.succeed(calls[0]!.answer, true)
      expect(yield* Fiber.join(first)).toBe(true)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([[0], [1, 2]])
      yield* Deferred.succeed(calls[1]!.answer, true)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([[0], [1, 2], [3]])
      yield* Deferred.succeed(calls[2]!.answer, true)
      // each caller gets its own item's answer
      expect(yield* Fiber.joinAll(rest)).toEqual([false, true, false])
    }))

  it.effect("a failed call fails every ack it carried; an ack interrupted before it was sent is dropped", () =>
    Effect.gen(function*() {
      const { calls, flush } = yield* engine
      const ack = ackBatcher(10, flush)
      const first = yield* Effect.forkChild(ack(0), { startImmediately: true })
      yield* settle
      const [a, dropped, b] = yield* Effect.forEach(
        [2, 4, 6],
        (n) => Effect.forkChild(ack(n), { startImmediately: true })
      )
      yield* settle
      yield* Fiber.interrupt(dropped!)
      yield* Deferred.succeed(calls[0]!.answer, true)
      expect(yield* Fiber.join(first)).toBe(true)
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([[0], [2, 6]])
      yield* Deferred.fail(calls[1]!.answer, "down")
      expect(yield* Fiber.await(a!)).toEqual(Exit.fail("down"))
      expect(yield* Fiber.await(b!)).toEqual(Exit.fail("down"))
      // the sender is idle again: the next ack goes at once
      const next = yield* Effect.forkChild(ack(8), { startImmediately: true })
      yield* settle
      expect(calls.map((c) => c.items)).toEqual([[0], [2, 6], [8]])
      yield* Deferred.succeed(calls[2]!.answer, true)
      expect(yield* Fiber.join(next)).toBe(true)
    }))
})
