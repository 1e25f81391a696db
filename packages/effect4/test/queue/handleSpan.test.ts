/**
 * Effect 4 only: the consumer's `queue.handle` span captures no stack trace (Effect 4 records one per span as a
 * `References.CurrentStackFrame`, which Effect 3 has not; the span's attributes, parent and exit are checked by
 * both editions in the shared suite, packages/contract/suites/queue/memory.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, References } from "effect"
import { TestClock } from "effect/testing"
import { Consumer, QueueSource } from "../../src/index.js"

/** Advances the TestClock in steps until `done` holds. */
const until = (done: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      yield* Effect.repeat(Effect.yieldNow, { times: 50 })
      if (yield* done) return
      yield* TestClock.adjust("10 millis")
    }
    throw new Error("condition never held")
  })

describe("Consumer.run (memory), Effect 4", () => {
  it.effect("the handler runs in a queue.handle span that captures no stack trace (it would point at the consumer)", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly n: number }>({ visibilityTimeout: "1 minute" })
      yield* source.send([{ id: "a", body: { n: 0 } }])
      const frames: Array<References.StackFrame | undefined> = []
      const consumer = yield* Consumer.run({
        source,
        handler: () =>
          Effect.gen(function*() {
            frames.push(yield* References.CurrentStackFrame)
          }),
        maxReceiveCount: 3
      })
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 1))
      expect(frames.map((frame) => frame?.name)).toEqual(["queue.handle"])
      expect(frames[0]!.stack()).toBeUndefined()
    }))
})
