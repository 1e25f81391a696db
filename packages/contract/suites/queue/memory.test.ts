import {
  type DurationInput,
  fork,
  gaugeValue,
  handClock,
  pollFiber,
  provideScope,
  queueSpaced,
  scoped,
  TestClock,
  withClock,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Option, Scope, type Tracer } from "effect"
import { Consumer, DeadLetter, Deadline, Failure, QueueSource } from "effect-resilience"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import { type Body, runSoak } from "./soak.js"

/** The fiber's exit, if it has ended. */
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.sync(() => {
    const exit = pollFiber(fiber)
    return exit === undefined ? Option.none() : Option.some(exit)
  })

/** One millisecond of real time, whatever the `Clock` (the soak runs on a hand-moved one). */
const realMillisecond = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 1)))

/** A span's parent (Effect 3 keeps it in an `Option`, Effect 4 as the span or `undefined`). */
const parentOf = (span: Tracer.Span): unknown => {
  const parent: unknown = span.parent
  return Option.isOption(parent) ? Option.getOrUndefined(parent) : parent
}

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 50 })

/** A delivery, for handlers called directly. */
const delivery = (id: string): QueueSource.Message<unknown> => ({
  id,
  key: undefined,
  body: null,
  receiveCount: 1,
  enqueuedAt: 0,
  receivedAt: 0,
  lastError: undefined,
  receipt: "0:0"
})

const msg = (id: string, n = 0, key?: string) => key === undefined ? { id, body: { n } } : { id, key, body: { n } }

const depthOf = (queue: string) => gaugeValue(DeadLetter.depthGauge, { queue })

/** Advances the TestClock in steps until `done` holds. */
const until = (done: Effect.Effect<boolean>, step: DurationInput = "10 millis", max = 10_000) =>
  Effect.gen(function*() {
    for (let i = 0; i < max; i++) {
      yield* settle
      if (yield* done) return
      yield* TestClock.adjust(step)
    }
    throw new Error("condition never held")
  })

describe("QueueSource.memory", () => {
  it.effect("hides a received message for the visibility timeout, then redelivers it with a higher count", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 second" })
      yield* source.send([msg("a"), msg("b")])
      const first = yield* source.receive(1)
      expect(first.map((m) => [m.id, m.receiveCount])).toEqual([["a", 1]])
      expect((yield* source.receive(10)).map((m) => m.id)).toEqual(["b"])
      expect(yield* source.receive(10)).toEqual([])
      yield* TestClock.adjust("999 millis")
      expect(yield* source.receive(10)).toEqual([])
      yield* TestClock.adjust("1 millis")
      const again = yield* source.receive(10)
      expect(again.map((m) => [m.id, m.receiveCount])).toEqual([["a", 2], ["b", 2]])
      // the first receipt is stale now: it can neither release nor dead-letter the message
      expect(yield* source.release(first[0]!)).toBe(false)
      expect(yield* source.deadLetter(first[0]!, "x")).toBe(false)
      expect(yield* source.ack(again[0]!)).toBe(true)
      expect(yield* source.ack(again[0]!)).toBe(false)
    }))

  it.effect("release with a delay and an error; undoReceive takes the receive back", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      yield* source.send([msg("a")])
      const [a] = yield* source.receive(1)
      expect(yield* source.release(a!, { delay: "5 seconds", error: "boom" })).toBe(true)
      yield* TestClock.adjust("4 seconds")
      expect(yield* source.receive(1)).toEqual([])
      yield* TestClock.adjust("1 second")
      const [again] = yield* source.receive(1)
      expect(again).toMatchObject({ id: "a", receiveCount: 2, lastError: "boom" })
      yield* source.release(again!, { undoReceive: true })
      expect((yield* source.receive(1))[0]).toMatchObject({ id: "a", receiveCount: 2 })
    }))

  it.effect("dead letters: list, inspect, redrive, purge, depth gauge", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute", name: "dlq-ops" })
      yield* source.send([msg("a", 1, "k"), msg("b", 2), msg("c", 3)])
      yield* TestClock.adjust("1 second")
      const received = yield* source.receive(3)
      for (const m of received) expect(yield* source.deadLetter(m, `bad ${m.id}`)).toBe(true)
      expect(yield* depthOf("dlq-ops")).toBe(3)
      const listed = yield* source.deadLetters.list()
      expect(listed.map((d) => d.id)).toEqual(["a", "b", "c"])
      expect(listed[0]).toMatchObject({
        id: "a",
        key: "k",
        body: { n: 1 },
        reason: "bad a",
        receiveCount: 1,
        firstSeenAt: 0,
        lastSeenAt: 1000,
        deadLetteredAt: 1000
      })
      expect(yield* source.deadLetters.list({ limit: 1 })).toHaveLength(1)
      expect(Option.getOrThrow(yield* source.deadLetters.inspect("b")).reason).toBe("bad b")
      expect(Option.isNone(yield* source.deadLetters.inspect("zz"))).toBe(true)

      expect(yield* source.deadLetters.redrive(["a", "zz"])).toBe(1)
      const [back] = yield* source.receive(10)
      expect(back).toMatchObject({ id: "a", key: "k", body: { n: 1 }, receiveCount: 1 })
      expect(yield* source.deadLetters.purge(["b"])).toBe(1)
      expect(yield* source.deadLetters.depth).toBe(1)
      expect(yield* depthOf("dlq-ops")).toBe(1)
      expect(yield* source.deadLetters.purge()).toBe(1)
      expect(yield* depthOf("dlq-ops")).toBe(0)
    }))

  it("rejects a visibility timeout that could never work", () => {
    expect(() => QueueSource.memory({ visibilityTimeout: -1 })).toThrow(/visibilityTimeout/)
    // less than a millisecond: every message would be visible again before it could be handled
    expect(() => QueueSource.memory({ visibilityTimeout: 0 })).toThrow(/at least 1 millisecond/)
    expect(() => QueueSource.memory({ visibilityTimeout: "0.5 millis" })).toThrow(/at least 1 millisecond/)
    expect(Duration.toMillis(Effect.runSync(QueueSource.memory({ visibilityTimeout: 1.5 })).visibilityTimeout))
      .toBe(2)
  })
})

describe("Consumer.run (memory)", () => {
  scoped(
    "acknowledges after the handler returns, and retries Retryable failures within the delivery",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        yield* source.send([msg("a"), msg("b")])
        let calls = 0
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            Effect.suspend(() => ++calls <= 2 && m.id === "a" ? Effect.fail(Failure.retryable("busy")) : Effect.void),
          maxReceiveCount: 3,
          retry: { schedule: queueSpaced("100 millis"), maxAttempts: 3 }
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 2))
        expect(yield* consumer.stats).toMatchObject({ received: 2, processed: 2, deadLettered: 0, released: 0 })
        expect(yield* source.receive(10)).toEqual([])
      })
  )

  scoped(
    "a Fatal failure dead-letters at once; a poison message does not block the ones behind it",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute", name: "fatal-test" })
        yield* source.send([msg("poison"), msg("a"), msg("b")])
        const handled: Array<string> = []
        const dead: Array<string> = []
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            m.id === "poison"
              ? Effect.fail(Failure.fatal({ field: "total", problem: "negative" }))
              : Effect.sync(() => handled.push(m.id)),
          maxReceiveCount: 5,
          onDeadLetter: (m, reason) => Effect.sync(() => dead.push(`${m.id}: ${reason}`))
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed + s.deadLettered === 3))
        expect(handled).toEqual(["a", "b"])
        expect(dead).toEqual([`poison: Fatal: fatal failure: [object Object] {"field":"total","problem":"negative"}`])
        const entry = Option.getOrThrow(yield* source.deadLetters.inspect("poison"))
        expect(entry.receiveCount).toBe(1)
        expect(yield* depthOf("fatal-test")).toBe(1)
      })
  )

  scoped(
    "other failures and defects are redelivered until maxReceiveCount, then dead-lettered",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        yield* source.send([msg("typed"), msg("defect"), msg("late")])
        const seen = new Map<string, number>()
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            Effect.suspend(() => {
              seen.set(m.id, m.receiveCount)
              if (m.id === "typed") return Effect.fail<{ readonly _tag: string }>({ _tag: "Timeout" })
              if (m.id === "defect") return Effect.die(new Error("null pointer"))
              return m.receiveCount < 2 ? Effect.fail({ _tag: "Once" }) : Effect.void
            }),
          maxReceiveCount: 3,
          redeliveryDelay: (m) => `${m.receiveCount} seconds`
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed + s.deadLettered === 3), "100 millis")
        expect(Object.fromEntries(seen)).toEqual({ typed: 3, defect: 3, late: 2 })
        const typed = Option.getOrThrow(yield* source.deadLetters.inspect("typed"))
        expect(typed.reason).toBe("received 3 times (maxReceiveCount 3); last error: Timeout")
        const defect = Option.getOrThrow(yield* source.deadLetters.inspect("defect"))
        expect(defect.reason).toBe("received 3 times (maxReceiveCount 3); last error: defect: null pointer")
        // redelivery delays of 1 s then 2 s: the third receive happened at t >= 3 s
        expect(defect.lastSeenAt).toBeGreaterThanOrEqual(3000)
        expect((yield* consumer.stats).released).toBe(5)
      })
  )

  scoped(
    "a message received more than maxReceiveCount times (its consumers crashed) is dead-lettered unrun",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 second" })
        yield* source.send([msg("a")])
        // two consumers died holding the message
        yield* source.receive(1)
        yield* TestClock.adjust("1 second")
        yield* source.receive(1)
        yield* TestClock.adjust("1 second")
        let ran = false
        const consumer = yield* Consumer.run({
          source,
          handler: () => Effect.sync(() => (ran = true)),
          maxReceiveCount: 2
        })
        yield* until(Effect.map(consumer.stats, (s) => s.deadLettered === 1))
        expect(ran).toBe(false)
        const entry = Option.getOrThrow(yield* source.deadLetters.inspect("a"))
        expect(entry.reason).toContain("received 3 times (maxReceiveCount 2); last error: none recorded")
      })
  )

  scoped(
    "the per-message timeout fails a hung handler (Deadline.within) and the message is redelivered",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        yield* source.send([msg("a")])
        const consumer = yield* Consumer.run({
          source,
          handler: (m) => m.receiveCount === 1 ? Effect.never : Effect.void,
          maxReceiveCount: 3,
          timeout: "2 seconds"
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 1), "500 millis")
        expect(yield* consumer.stats).toMatchObject({ released: 1, processed: 1 })
      })
  )

  scoped(
    "the handler sees its time limit as its deadline; the worker's own deadline is not changed by it",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        const start = yield* Clock.currentTimeMillis
        yield* source.send([msg("a"), msg("b")])
        const seen: Array<Option.Option<number>> = []
        const consumer = yield* Consumer.run({
          source,
          handler: () => Effect.flatMap(Deadline.current, (at) => Effect.sync(() => seen.push(at))),
          maxReceiveCount: 3,
          timeout: "20 seconds"
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 2))
        expect(seen).toEqual([Option.some(start + 20_000), Option.some(start + 20_000)])
        expect(yield* Deadline.current).toEqual(Option.none())
      })
  )

  it.effect("an interrupted handler leaves its message in flight, to come back after the visibility timeout", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "5 seconds" })
      yield* source.send([msg("a")])
      const applied = new Map<string, number>()
      const handler = yield* Consumer.idempotentMemory((m: QueueSource.Message<unknown>) =>
        Effect.sync(() => applied.set(m.id, (applied.get(m.id) ?? 0) + 1))
      )
      const scope = yield* Scope.make()
      const c = yield* provideScope(scope)(
        Consumer.run({
          source,
          handler: (m) => Effect.andThen(handler(m), m.receiveCount === 1 ? Effect.interrupt : Effect.void),
          maxReceiveCount: 3
        })
      )
      yield* until(Effect.map(c.stats, (s) => s.abandoned === 1))
      yield* TestClock.adjust("4 seconds")
      yield* settle
      expect((yield* c.stats).processed).toBe(0)
      yield* until(Effect.map(c.stats, (s) => s.processed === 1), "100 millis")
      expect(applied.get("a")).toBe(1)
      yield* Scope.close(scope, Exit.void)
    }))

  scoped("holds at most bufferSize + concurrency messages: backpressure on the poller", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      yield* source.send(Array.from({ length: 50 }, (_, i) => msg(`m${i}`, i)))
      const gate = yield* Deferred.make<void>()
      let running = 0
      let peak = 0
      const consumer = yield* Consumer.run({
        source,
        handler: () =>
          Effect.acquireUseRelease(
            Effect.sync(() => (peak = Math.max(peak, ++running))),
            () => Deferred.await(gate),
            () => Effect.sync(() => running--)
          ),
        concurrency: 3,
        bufferSize: 4,
        maxReceiveCount: 3
      })
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      expect(yield* consumer.stats).toMatchObject({ received: 7, handling: 3, buffered: 4 })
      yield* Deferred.succeed(gate, undefined)
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 50))
      expect(peak).toBe(3)
    }))

  it.effect("closing the scope drains: running handlers finish and are acked, buffered messages are released", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      yield* source.send(Array.from({ length: 10 }, (_, i) => msg(`m${i}`, i)))
      const gate = yield* Deferred.make<void>()
      const finished: Array<string> = []
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          handler: (m) => Effect.andThen(Deferred.await(gate), Effect.sync(() => finished.push(m.id))),
          concurrency: 2,
          bufferSize: 3,
          maxReceiveCount: 3
        })
      )
      yield* settle
      expect(yield* consumer.stats).toMatchObject({ handling: 2, buffered: 3 })
      const closing = yield* fork(Scope.close(scope, Exit.void))
      yield* settle
      expect(Option.isNone(yield* poll(closing))).toBe(true) // waits for the two handlers
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(closing)
      expect(finished.sort()).toEqual(["m0", "m1"])
      expect(yield* consumer.stats).toMatchObject({ processed: 2, handling: 0, buffered: 0 })
      // the three buffered messages are visible again at once, with their receive undone
      const left = yield* source.receive(100)
      expect(left.map((m) => m.id).sort()).toEqual(["m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"])
      expect(left.every((m) => m.receiveCount === 1)).toBe(true)
    }))

  it.effect("a worker takes the next message while the last acknowledgement is under way; closing waits for it", () =>
    Effect.gen(function*() {
      const memory = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      const gate = yield* Deferred.make<void>()
      const acks: Array<string> = []
      // an engine that answers acks only when the gate opens
      const source: QueueSource.QueueSource<Body> = {
        ...memory,
        ack: (m) =>
          Effect.andThen(Deferred.await(gate), Effect.tap(memory.ack(m), () => Effect.sync(() => acks.push(m.id)))),
        ackMany: (ms) =>
          Effect.andThen(
            Deferred.await(gate),
            Effect.tap(memory.ackMany!(ms), () => Effect.sync(() => acks.push(...ms.map((m) => m.id))))
          )
      }
      yield* source.send([msg("a"), msg("b"), msg("c")])
      const handled: Array<string> = []
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          handler: (m) => Effect.sync(() => handled.push(m.id)),
          concurrency: 1,
          bufferSize: 2,
          maxReceiveCount: 3
        })
      )
      yield* settle
      // all three handled by the one worker, none acknowledged yet: each still holds its slot
      expect(handled).toEqual(["a", "b", "c"])
      expect(yield* consumer.stats).toMatchObject({ received: 3, processed: 0, handling: 0 })
      const closing = yield* fork(Scope.close(scope, Exit.void))
      yield* settle
      expect(Option.isNone(yield* poll(closing))).toBe(true)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(closing)
      expect(acks.sort()).toEqual(["a", "b", "c"])
      expect((yield* consumer.stats).processed).toBe(3)
      expect(yield* memory.receive(10)).toEqual([])
    }))

  scoped(
    "the handler runs in a queue.handle span: its attributes, the parent of the handler's spans, ended with its exit",
    () =>
      Effect.gen(function*() {
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        yield* source.send([msg("a"), msg("b")])
        const seen: Array<Tracer.Span> = []
        const children: Array<Tracer.Span> = []
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            Effect.gen(function*() {
              seen.push(yield* Effect.currentSpan)
              children.push(yield* Effect.withSpan(Effect.currentSpan, "inner"))
              if (m.id === "b") return yield* Effect.fail("boom")
            }),
          maxReceiveCount: 3,
          // b does not come back while the test looks
          redeliveryDelay: "1 hour"
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 1 && s.released === 1))
        expect(seen.map((span) => [span.name, span.attributes.get("message.id")])).toEqual([
          ["queue.handle", "a"],
          ["queue.handle", "b"]
        ])
        expect(seen[0]!.attributes.get("queue.name")).toBe("memory")
        expect(seen[0]!.attributes.get("message.receive_count")).toBe(1)
        expect(children.map(parentOf)).toEqual(seen)
        expect(seen.map((span) => span.status._tag)).toEqual(["Ended", "Ended"])
        const exits = seen.map((span) => span.status._tag === "Ended" ? span.status.exit : undefined)
        expect(Exit.isSuccess(exits[0]!)).toBe(true)
        expect(Exit.isFailure(exits[1]!)).toBe(true)
      })
  )

  scoped(
    "the consumer's acks go in groups: those that wait while a lane is busy share one call",
    () =>
      Effect.gen(function*() {
        const memory = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        const gate = yield* Deferred.make<void>()
        const calls: Array<ReadonlyArray<string>> = []
        const source: QueueSource.QueueSource<Body> = {
          ...memory,
          ackMany: (ms) => {
            calls.push(ms.map((m) => m.id))
            return Effect.andThen(Deferred.await(gate), memory.ackMany!(ms))
          }
        }
        yield* source.send(["a", "b", "c", "d", "e", "f"].map((id) => msg(id)))
        // b..f wait until `go`, so a is handled alone
        const go = yield* Deferred.make<void>()
        const consumer = yield* Consumer.run({
          source,
          handler: (m) => m.id === "a" ? Effect.void : Deferred.await(go),
          bufferSize: 5,
          maxReceiveCount: 3
        })
        yield* settle
        // a lane takes the acks of the handlers that ended before it ran: a alone, and its call waits
        expect(calls).toEqual([["a"]])
        yield* Deferred.succeed(go, undefined)
        yield* settle
        // b..f end while that call waits: the second lane starts once half the capacity (6) waits, and takes every
        // one waiting then (at least those three) in one call; the rest wait for a lane
        expect(calls[1]!.length).toBeGreaterThanOrEqual(3)
        expect(calls.length).toBeLessThanOrEqual(3)
        yield* Deferred.succeed(gate, undefined)
        yield* settle
        expect(calls.length).toBeLessThanOrEqual(3)
        expect(calls.flat().sort()).toEqual(["a", "b", "c", "d", "e", "f"])
        expect((yield* consumer.stats).processed).toBe(6)
        expect(yield* memory.receive(10)).toEqual([])
      })
  )

  scoped(
    "a wrapper that replaces ack is the one the consumer acknowledges with: spreading a source leaves its grouped ack out",
    () =>
      Effect.gen(function*() {
        const memory = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
        const acked: Array<string> = []
        const source: QueueSource.QueueSource<Body> = {
          ...memory,
          ack: (m) => Effect.sync(() => acked.push(m.id)).pipe(Effect.andThen(memory.ack(m)))
        }
        expect(source.ackMany).toBeUndefined()
        expect(memory.ackMany).toBeDefined()
        yield* source.send(["a", "b", "c"].map((id) => msg(id)))
        const consumer = yield* Consumer.run({ source, handler: () => Effect.void, bufferSize: 3, maxReceiveCount: 3 })
        yield* settle
        expect((yield* consumer.stats).processed).toBe(3)
        expect([...acked].sort()).toEqual(["a", "b", "c"])
        expect(yield* memory.receive(10)).toEqual([])
      })
  )

  scoped(
    "an ack call that hangs fails at the visibility timeout: its messages come back, the consumer goes on",
    () =>
      Effect.gen(function*() {
        const memory = yield* QueueSource.memory<Body>({ visibilityTimeout: "10 seconds" })
        let calls = 0
        // the first two calls (both lanes) never answer; later ones do
        const hangFirstTwo = <X>(effect: Effect.Effect<X, QueueSource.QueueError>) =>
          Effect.suspend(() => ++calls <= 2 ? Effect.never : effect)
        const source: QueueSource.QueueSource<Body> = {
          ...memory,
          ack: (m) => hangFirstTwo(memory.ack(m)),
          ackMany: (ms) => hangFirstTwo(memory.ackMany!(ms))
        }
        yield* source.send([msg("a"), msg("b"), msg("c"), msg("d"), msg("e")])
        const handled: Array<string> = []
        // b's first handling ends after a's ack went out: each lane carries one of them
        const go = yield* Deferred.make<void>()
        const consumer = yield* Consumer.run({
          source,
          handler: (m) =>
            Effect.andThen(m.id === "b" ? Deferred.await(go) : Effect.void, Effect.sync(() => handled.push(m.id))),
          bufferSize: 1,
          maxReceiveCount: 3
        })
        yield* settle
        yield* Deferred.succeed(go, undefined)
        yield* settle
        expect(calls).toBe(2)
        // a and b gave their slots back as they went to the acker (as many as the capacity, 2, may); c and d wait
        // for a lane holding theirs: nothing more is claimed
        expect(handled).toEqual(["a", "b", "c", "d"])
        expect(yield* consumer.stats).toMatchObject({ received: 4, processed: 0 })
        yield* TestClock.adjust("10 seconds")
        yield* settle
        // the calls gave up; a and b came back (not acked) and were handled again; c and d went in the next call,
        // freeing their slots, and e was claimed (a receipt that went stale meanwhile is refused: that message is
        // handled once more)
        expect([...new Set(handled)].sort()).toEqual(["a", "b", "c", "d", "e"])
        expect(handled.filter((id) => id === "a" || id === "b")).toHaveLength(4)
        expect(yield* consumer.stats).toMatchObject({ processed: 5, handling: 0 })
        expect(yield* memory.receive(10)).toEqual([])
      })
  )

  it.effect("closing gives up on an ack call that does not answer: its messages are left in flight, abandoned", () =>
    Effect.gen(function*() {
      const memory = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      const source: QueueSource.QueueSource<Body> = { ...memory, ackMany: () => Effect.never }
      yield* source.send([msg("a"), msg("b")])
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({ source, handler: () => Effect.void, maxReceiveCount: 3, shutdownGrace: "1 second" })
      )
      yield* settle
      expect(yield* consumer.stats).toMatchObject({ received: 2, processed: 0, handling: 0 })
      const closing = yield* fork(Scope.close(scope, Exit.void))
      // the grace, then the interruption: the lanes end at once (well before the minute of their time limit)
      yield* until(Effect.map(poll(closing), Option.isSome), "100 millis", 20)
      expect(yield* consumer.stats).toMatchObject({ processed: 0, abandoned: 2 })
    }))

  scoped("orderedByKey: messages of one key are handled one at a time, in order", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 minute" })
      yield* source.send(Array.from({ length: 60 }, (_, i) => msg(`m${i}`, i, `k${i % 3}`)))
      const order = new Map<string, Array<number>>()
      const active = new Set<string>()
      let overlap = false
      const consumer = yield* Consumer.run({
        source,
        handler: (m) =>
          Effect.gen(function*() {
            if (active.has(m.key!)) overlap = true
            active.add(m.key!)
            yield* Effect.sleep(`${(m.body.n * 7) % 5} millis`)
            order.set(m.key!, [...(order.get(m.key!) ?? []), m.body.n])
            active.delete(m.key!)
          }),
        concurrency: 4,
        orderedByKey: true,
        maxReceiveCount: 3
      })
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 60), "1 millis")
      expect(overlap).toBe(false)
      for (const [, ns] of order) expect(ns).toEqual([...ns].sort((a, b) => a - b))
    }))

  it.effect("a message that waited in the buffer past its visibility timeout is not handled (it was redelivered)", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 second" })
      yield* source.send([msg("a"), msg("b"), msg("c")])
      const gate = yield* Deferred.make<void>()
      const runs: Array<string> = []
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          handler: (m) =>
            Effect.andThen(
              Effect.sync(() => runs.push(`${m.id}#${m.receiveCount}`)),
              m.id === "a" ? Deferred.await(gate) : Effect.void
            ),
          concurrency: 1,
          bufferSize: 2,
          maxReceiveCount: 5,
          timeout: "1 minute" // a runs past its visibility timeout (renewed): b and c wait behind it
        })
      )
      yield* settle
      expect(yield* consumer.stats).toMatchObject({ handling: 1, buffered: 2 })
      // b and c wait behind a until their visibility runs out: the source hands them out again
      yield* TestClock.adjust("1 second")
      yield* settle
      yield* Deferred.succeed(gate, undefined)
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 3))
      // the expired deliveries were skipped (neither run nor acked); each message ran once
      expect(runs.map((r) => r.split("#")[0])).toEqual(["a", "b", "c"])
      expect(yield* consumer.stats).toMatchObject({ processed: 3, abandoned: 2, deadLettered: 0 })
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("orderedByKey: a hot key's buffered messages that expired are skipped, other keys keep going", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "500 millis" })
      yield* source.send([
        ...Array.from({ length: 8 }, (_, i) => msg(`hot-${i}`, i, "hot")),
        ...Array.from({ length: 4 }, (_, i) => msg(`cold-${i}`, i, `cold-${i}`))
      ])
      const t0 = yield* Clock.currentTimeMillis
      const late: Array<string> = []
      const coldDoneAt: Array<number> = []
      const scope = yield* Scope.make()
      const consumer = yield* provideScope(scope)(
        Consumer.run({
          source,
          handler: (m) =>
            Effect.gen(function*() {
              const now = yield* Clock.currentTimeMillis
              // started after its visibility ran out: someone else may be handling it too
              if (now - m.receivedAt >= 500) late.push(`${m.id}#${m.receiveCount}`)
              if (m.key === "hot") yield* Effect.sleep("100 millis")
              else coldDoneAt.push(now - t0)
            }),
          concurrency: 4,
          bufferSize: 4,
          orderedByKey: true,
          maxReceiveCount: 10,
          pollInterval: "10 millis"
        })
      )
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 12))
      expect(late).toEqual([])
      expect((yield* consumer.stats).abandoned).toBeGreaterThan(0)
      // the cold keys were not held up behind the hot key's expired messages
      expect(coldDoneAt.length).toBe(4)
      expect(Math.max(...coldDoneAt)).toBeLessThan(600)
      yield* Scope.close(scope, Exit.void)
    }))

  it("rejects options that could never work", () => {
    const source = Effect.runSync(QueueSource.memory({ visibilityTimeout: "1 second" }))
    const base = { source, handler: () => Effect.void, maxReceiveCount: 3 }
    expect(() => Consumer.run({ ...base, maxReceiveCount: 0 })).toThrow(/maxReceiveCount/)
    expect(() => Consumer.run({ ...base, concurrency: 1.5 })).toThrow(/concurrency/)
    expect(() => Consumer.run({ ...base, bufferSize: 0 })).toThrow(/bufferSize/)
    expect(() => Consumer.run({ ...base, timeout: -1 })).toThrow(/timeout/)
    expect(() => Consumer.run({ ...base, redeliveryDelay: "soon" as never })).toThrow(/redeliveryDelay/)
    expect(() => ConsumerSql.idempotent(() => Effect.void, { table: "x; DROP TABLE y" })).toThrow(/identifier/)
  })
})

describe("Consumer.idempotentMemory", () => {
  it.effect("applies an id once, and a concurrent duplicate waits for the first", () =>
    Effect.gen(function*() {
      const processed = new Set<string>()
      const gate = yield* Deferred.make<void>()
      let applied = 0
      const handler = yield* Consumer.idempotentMemory(
        (_: QueueSource.Message<unknown>) => Effect.andThen(Deferred.await(gate), Effect.sync(() => ++applied)),
        { processed }
      )
      const first = yield* fork(handler(delivery("a")))
      const second = yield* fork(handler(delivery("a")))
      yield* settle
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toEqual(Option.some(1))
      expect(yield* Fiber.join(second)).toEqual(Option.none())
      expect(applied).toBe(1)
      expect([...processed]).toEqual(["a"])
    }))

  it.effect("a failure records nothing, so the next delivery runs again", () =>
    Effect.gen(function*() {
      let calls = 0
      const handler = yield* Consumer.idempotentMemory((_: QueueSource.Message<unknown>) =>
        Effect.suspend(() => ++calls === 1 ? Effect.fail("boom") : Effect.succeed(calls))
      )
      expect(yield* Effect.flip(handler(delivery("a")))).toBe("boom")
      expect(yield* handler(delivery("a"))).toEqual(Option.some(2))
      expect(yield* handler(delivery("a"))).toEqual(Option.none())
    }))
})

describe("soak (memory)", () => {
  it.effect(
    "10,000 messages: good ones applied exactly once, poison in the DLQ, nothing lost",
    () =>
      Effect.gen(function*() {
        // virtual time moved by hand: TestClock's waits for every fiber to suspend, around each of the
        // thousands of sleepers woken here (backoffs, polls), took most of this test's time
        const { advance, clock } = handClock()
        const source = yield* QueueSource.memory<Body>({ visibilityTimeout: "1 second", name: "soak-memory" })
        const effects = new Map<string, number>()
        const result = yield* runSoak({
          source,
          idempotent: (h) => Effect.runSync(Consumer.idempotentMemory(h)), // runSoak builds it once
          record: (id) => Effect.sync(() => void effects.set(id, (effects.get(id) ?? 0) + 1)),
          effects: Effect.sync(() => effects),
          remaining: Effect.gen(function*() {
            yield* advance(60_000)
            return (yield* source.receive(100_000)).length
          }),
          transactional: false
        }, {
          n: Number(process.env.SOAK_N ?? 10_000),
          seed: 7,
          prefix: "mem",
          concurrency: 16,
          maxReceiveCount: 5,
          // time moves in 10 ms steps; a real millisecond between steps lets every fiber run dry
          tick: Effect.andThen(advance(10), realMillisecond),
          maxTicks: 100_000
        }).pipe(withClock(clock))
        console.log("[soak memory]", JSON.stringify(result))
      }),
    60_000
  )
})
