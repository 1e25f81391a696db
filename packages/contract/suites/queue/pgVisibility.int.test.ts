/**
 * Issue 19 item 8 on a real PostgreSQL: a hung handler does not stop the consumer (time limit, then the
 * dead-letter queue), a slow handler is renewed (`extend`, one fenced UPDATE) and runs once, and a stale
 * delivery can neither extend nor acknowledge the message. `PgQueue` decides visibility with the caller's
 * `Clock`, so TestClock drives it; between clock steps the test waits until every statement the consumer
 * sent has answered (a condition, counted by a wrapper around the source), so the clock never runs ahead
 * of the database.
 */
import { describePg, eventually, fork, pollFiber, provideScope, queuePgClient, TestClock, yieldNow } from "#edition"
import { expect, layer } from "@effect/vitest"
import { Clock, Effect, Exit, Option, Scope } from "effect"
import { Consumer, type QueueSource } from "effect-resilience"
import * as PgQueue from "effect-resilience/PgQueue"
import { pgTables } from "./pgTables.js"

interface Body {
  readonly n: number
}

const { fresh } = pgTables()

const settle = Effect.repeat(yieldNow, { times: 20 })
const msg = (id: string) => ({ id, body: { n: 0 } })

/** The source, with a count of its calls still waiting for PostgreSQL, and the instants of its extensions. */
const tracked = <A>(source: QueueSource.QueueSource<A>) => {
  let inFlight = 0
  const extendedAt: Array<number> = []
  const track = <X, E>(effect: Effect.Effect<X, E>) =>
    Effect.acquireUseRelease(Effect.sync(() => inFlight++), () => effect, () => Effect.sync(() => inFlight--))
  const wrapped: QueueSource.QueueSource<A> = {
    ...source,
    receive: (max) => track(source.receive(max)),
    ack: (m) => track(source.ack(m)),
    ackMany: (ms) => track(source.ackMany!(ms)),
    extend: (m) =>
      Effect.andThen(
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => extendedAt.push(now))),
        track(source.extend!(m))
      ),
    release: (m, o) => track(source.release(m, o)),
    deadLetter: (m, r) => track(source.deadLetter(m, r))
  }
  /** Moves the clock by `millis` once every call has answered, then waits for the calls the move set off. */
  const step = (millis: number) =>
    Effect.gen(function*() {
      yield* eventually(Effect.sync(() => inFlight === 0))
      yield* TestClock.adjust(millis)
      yield* settle
      yield* eventually(Effect.sync(() => inFlight === 0))
      yield* settle
    })
  /** Steps the clock until `done` holds; fails after `max` steps. */
  const until = <E, R>(done: Effect.Effect<boolean, E, R>, millis: number, max: number) =>
    Effect.gen(function*() {
      for (let i = 0; i < max; i++) {
        if (yield* done) return
        yield* step(millis)
      }
      return yield* Effect.fail(new Error(`the condition did not hold within ${max} steps of ${millis} ms`))
    })
  return { source: wrapped, extendedAt, step, until }
}

describePg("PgQueue: time limits and visibility renewal", () => {
  layer(queuePgClient, { timeout: "60 seconds" })((it) => {
    it.effect("a hung poison message and 20 later ones: all 20 handled, the poison dead-lettered, close bounded", () =>
      Effect.gen(function*() {
        const base = yield* PgQueue.make<Body>({ table: fresh("hung"), visibilityTimeout: "1 second" })
        const { source, step, until } = tracked(base)
        const handled: Array<string> = []
        const scope = yield* Scope.make()
        const consumer = yield* Consumer.run({
          source,
          handler: (m) => m.id === "poison" ? Effect.never : Effect.sync(() => handled.push(m.id)),
          concurrency: 2,
          maxReceiveCount: 3
        }).pipe(provideScope(scope))
        yield* source.send([msg("poison")])
        yield* until(Effect.map(consumer.stats, (s) => s.handling === 1), 100, 20)
        for (let i = 0; i < 25; i++) yield* step(100)
        yield* source.send(Array.from({ length: 20 }, (_, i) => msg(`m${i}`)))
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 20 && s.deadLettered === 1), 100, 100)
        expect(handled.length).toBe(20)
        const dead = Option.getOrThrow(yield* source.deadLetters.inspect("poison"))
        expect(dead.receiveCount).toBe(3)
        expect(dead.reason).toMatch(/^received 3 times \(maxReceiveCount 3\); last error: DeadlineExceeded/)

        yield* source.send([msg("poison")])
        yield* until(Effect.map(consumer.stats, (s) => s.handling === 1), 100, 20)
        const closing = yield* fork(Scope.close(scope, Exit.void))
        // the default grace here is the time limit, 1 s
        yield* until(Effect.sync(() => pollFiber(closing) !== undefined), 100, 12)
      }))

    it.effect("a handler slower than the visibility timeout but within its limit runs once: renewed at 1/3 left", () =>
      Effect.gen(function*() {
        const base = yield* PgQueue.make<Body>({ table: fresh("slow"), visibilityTimeout: "1 second" })
        const { extendedAt, source, until } = tracked(base)
        const runs: Array<number> = []
        yield* source.send([msg("slow")])
        const t0 = yield* Clock.currentTimeMillis
        const consumer = yield* Consumer.run({
          source,
          handler: (m) => Effect.andThen(Effect.sync(() => runs.push(m.receiveCount)), Effect.sleep("3 seconds")),
          concurrency: 2,
          maxReceiveCount: 5,
          timeout: "10 seconds",
          pollInterval: "50 millis"
        })
        yield* until(Effect.map(consumer.stats, (s) => s.processed === 1), 50, 100)
        expect(runs).toEqual([1])
        expect(extendedAt.map((at) => at - t0)).toEqual([667, 1334, 2001, 2668])
        expect(yield* consumer.stats).toMatchObject({ processed: 1, released: 0, extended: 4 })
      }).pipe(Effect.scoped))

    it.effect("extend pushes the visibility out; a stale delivery can neither extend nor acknowledge", () =>
      Effect.gen(function*() {
        const source = yield* PgQueue.make<Body>({ table: fresh("fence"), visibilityTimeout: "1 second" })
        yield* source.send([msg("a")])
        const [first] = yield* source.receive(1)
        yield* TestClock.adjust("900 millis")
        expect(yield* source.extend!(first!)).toBe(true)
        yield* TestClock.adjust("999 millis")
        expect(yield* source.receive(1)).toEqual([])
        yield* TestClock.adjust("1 millis")
        const [second] = yield* source.receive(1)
        expect(second).toMatchObject({ id: "a", receiveCount: 2 })
        expect(yield* source.extend!(first!)).toBe(false)
        expect(yield* source.ack(first!)).toBe(false)
        expect(yield* source.release(first!)).toBe(false)
        expect(yield* source.extend!(second!)).toBe(true)
        expect(yield* source.ack(second!)).toBe(true)
        expect(yield* source.ack(second!)).toBe(false)
      }))
  })
})
