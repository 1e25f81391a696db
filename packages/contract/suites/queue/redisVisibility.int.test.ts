/**
 * Issue 19 item 8 on a real Redis: a hung handler does not stop the consumer (time limit, then the
 * dead-letter queue), a slow handler is renewed (`extend`: a fenced script resetting the entry's idle time)
 * and runs once although another worker keeps taking over entries idle longer than the visibility timeout,
 * and a stale delivery can neither extend nor acknowledge the message. Visibility is Redis's own clock, so
 * these tests use short real timeouts and wait for conditions.
 */
import {
  deleteKeys,
  describeRedis,
  eventually,
  fork,
  IoRedis as Redis,
  pollFiber,
  provideScope,
  REDIS_URL,
  uniquePrefix
} from "#edition"
import { afterAll, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Scope } from "effect"
import { Consumer } from "effect-resilience"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"

interface Body {
  readonly n: number
}

const prefix = uniquePrefix("queue-visibility")
let streams = 0
const freshStream = () => `${prefix}stream-${++streams}`
const msg = (id: string) => ({ id, body: { n: 0 } })

afterAll(async () => {
  await deleteKeys(prefix).catch(() => {})
})

const connect = Effect.acquireRelease(
  Effect.sync(() => new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })),
  (redis) => Effect.promise(() => redis.quit())
)

describeRedis("RedisStreamQueue: time limits and visibility renewal", () => {
  it.live("a hung poison message and 20 later ones: all 20 handled, the poison dead-lettered, close bounded", () =>
    Effect.gen(function*() {
      const redis = yield* connect
      const source = yield* RedisStreamQueue.make<Body>({
        redis,
        stream: freshStream(),
        visibilityTimeout: "500 millis",
        reclaimInterval: "50 millis"
      })
      const handled: Array<string> = []
      const scope = yield* Scope.make()
      const consumer = yield* Consumer.run({
        source,
        handler: (m) => m.id === "poison" ? Effect.never : Effect.sync(() => handled.push(m.id)),
        concurrency: 2,
        maxReceiveCount: 3,
        pollInterval: "10 millis"
      }).pipe(provideScope(scope))
      yield* source.send([msg("poison")])
      yield* eventually(Effect.map(consumer.stats, (s) => s.handling === 1))
      yield* source.send(Array.from({ length: 20 }, (_, i) => msg(`m${i}`)))
      yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 20 && s.deadLettered === 1), {
        within: "20 seconds"
      })
      expect(handled.length).toBe(20)
      const dead = Option.getOrThrow(yield* source.deadLetters.inspect("poison"))
      expect(dead.receiveCount).toBe(3)
      expect(dead.reason).toMatch(/^received 3 times \(maxReceiveCount 3\); last error: DeadlineExceeded/)

      yield* source.send([msg("poison")])
      yield* eventually(Effect.map(consumer.stats, (s) => s.handling === 1))
      const closing = yield* fork(Scope.close(scope, Exit.void))
      // the default grace is the time limit here (500 ms); a hang still fails
      yield* eventually(Effect.sync(() => pollFiber(closing) !== undefined), { within: "10 seconds" })
    }).pipe(Effect.scoped))

  it.live("a handler slower than the visibility timeout but within its limit runs once: renewed", () =>
    Effect.gen(function*() {
      const redis = yield* connect
      const stream = freshStream()
      const options = { redis, stream, visibilityTimeout: "600 millis", reclaimInterval: "20 millis" } as const
      const source = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "slow" })
      const runs: Array<string> = []
      yield* source.send([msg("slow")])
      const consumer = yield* Consumer.run({
        source,
        handler: (m) =>
          Effect.andThen(
            Effect.sync(() => runs.push(`slow#${m.receiveCount}`)),
            // longer than three visibility timeouts: it ends only after the renewals held for that long
            eventually(Effect.sync(() => Date.now() - started >= 2_000), { every: "20 millis" })
          ),
        maxReceiveCount: 5,
        timeout: "30 seconds",
        pollInterval: "10 millis"
      })
      const started = Date.now()
      // another consumer of the group keeps taking over whatever has been idle for the visibility timeout
      const other = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "other" })
      const stolen: Array<string> = []
      const thief = yield* fork(
        Effect.forever(
          Effect.andThen(
            Effect.flatMap(other.receive(10), (got) => Effect.sync(() => stolen.push(...got.map((m) => m.id)))),
            Effect.sleep("20 millis")
          )
        )
      )
      yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 1), { within: "20 seconds" })
      yield* Fiber.interrupt(thief)
      expect(runs).toEqual(["slow#1"])
      expect(stolen).toEqual([])
      expect((yield* consumer.stats).extended).toBeGreaterThanOrEqual(3)
    }).pipe(Effect.scoped))

  it.live("a stale delivery (taken over, or claimed again) can neither extend nor acknowledge", () =>
    Effect.gen(function*() {
      const redis = yield* connect
      const stream = freshStream()
      const options = { redis, stream, visibilityTimeout: "200 millis", reclaimInterval: "1 millis" } as const
      const dead = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "dead" })
      const alive = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "alive" })
      yield* dead.send([msg("a")])
      const [held] = yield* dead.receive(1)
      expect(yield* dead.extend!(held!)).toBe(true)
      let taken: ReadonlyArray<{ readonly receiveCount: number; readonly receipt: string }> = []
      yield* eventually(Effect.map(alive.receive(1), (got) => (taken = got).length > 0))
      const current = taken[0]! as typeof held & {}
      expect(current.receiveCount).toBe(2)
      expect(yield* dead.extend!(held!)).toBe(false)
      expect(yield* dead.ack(held!)).toBe(false)
      // a delivery the same consumer claimed again is stale too (the delivery count moved on)
      let again: ReadonlyArray<typeof current> = []
      yield* eventually(Effect.map(alive.receive(1), (got) => (again = got).length > 0))
      expect(again[0]!.receiveCount).toBe(3)
      expect(yield* alive.extend!(current)).toBe(false)
      expect(yield* alive.ack(current)).toBe(false)
      expect(yield* alive.extend!(again[0]!)).toBe(true)
      expect(yield* alive.ack(again[0]!)).toBe(true)
      expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
    }).pipe(Effect.scoped))

  it.live("concurrent acks share a script call, each fenced on its own: stale and repeated receipts match nothing", () =>
    Effect.gen(function*() {
      const redis = yield* connect
      const stream = freshStream()
      const options = { redis, stream, visibilityTimeout: "200 millis", reclaimInterval: "1 millis" } as const
      const dead = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "dead" })
      const alive = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "alive" })
      yield* dead.send(["a", "b", "c", "d"].map(msg))
      const first = yield* dead.receive(4)
      let taken: ReadonlyArray<(typeof first)[number]> = []
      yield* eventually(Effect.map(alive.receive(1), (got) => (taken = got).length > 0))
      const a = first.find((m) => m.id === taken[0]!.id)!
      const others = first.filter((m) => m !== a)
      // the taken-over delivery (stale), its current one twice, the other three (still "dead"'s), a bad receipt
      const [stale, current, repeated, ...rest] = yield* Effect.all([
        dead.ack(a),
        alive.ack(taken[0]!),
        alive.ack(taken[0]!),
        ...others.map((m) => dead.ack(m)),
        Effect.exit(dead.ack({ ...a, receipt: "not-an-entry:1" }))
      ], { concurrency: "unbounded" })
      expect(stale).toBe(false)
      expect([current, repeated].filter((acked) => acked === true)).toHaveLength(1)
      expect(rest.slice(0, 3)).toEqual([true, true, true])
      expect(Exit.isFailure(rest[3] as Exit.Exit<boolean, unknown>)).toBe(true)
      expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
    }).pipe(Effect.scoped))
})
