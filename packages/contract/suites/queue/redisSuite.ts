/**
 * The `RedisStreamQueue` contract against a real Redis, on one node (`redis.int.test.ts`) or a Redis Cluster (each
 * edition's test/redisCluster.int.test.ts imports it as `./contract/queue/redisSuite.js`): consumer groups,
 * `XAUTOCLAIM` recovery of a consumer that died holding messages, delivery counts from `XPENDING`, dead letters,
 * scripts reloaded after `NOSCRIPT`, and a soak (with the idempotent consumer on the edition's SQLite). Visibility
 * here is Redis's own clock, so these tests use short real timeouts. Every test uses streams no other test uses.
 */
import {
  eventually,
  type IoCluster as Cluster,
  type IoRedis as Redis,
  provideScope,
  queueReleaseScript as RELEASE,
  queueSqlite,
  queueStreamKeys as streamKeys,
  queueTimeoutFail,
  SqlClientModule as SqlClient
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Scope } from "effect"
import { Consumer, Failure, type QueueSource } from "effect-resilience"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Body, runSoak } from "./soak.js"

export interface RedisStreamQueueBackend {
  /** A client of the test's own, closed with the test's scope. */
  readonly connect: Effect.Effect<Redis | Cluster, never, Scope.Scope>
  /** A stream key no other test (or run) uses. */
  readonly freshStream: () => string
  /** How many messages the soak sends. */
  readonly soakMessages: number
}

/** The servers that may hold a key: the client itself, or every master of a Cluster. */
export const serversOf = (client: Redis | Cluster): ReadonlyArray<Redis> =>
  client.isCluster ? (client as Cluster).nodes("master") : [client as Redis]

/**
 * Real milliseconds since `since` (a `Date.now()`), as a lower bound on time Redis measured: Redis and
 * `Date.now()` both count whole milliseconds, so `n` ms by Redis's count is at least `n - 1` here.
 */
const elapsedSince = (since: number) => Date.now() - since + 1

const msg = (id: string, n = 0) => ({ id, body: { n } })

/** A directory removed with the scope. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "effect-resilience-queue-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Registers the queue's contract tests against `backend`. */
export const redisStreamQueueSuite = (name: string, backend: RedisStreamQueueBackend) => {
  const { connect, freshStream, soakMessages } = backend

  /** A fresh queue (10 s visibility) holding one message, "a", received once. */
  const oneReceived = Effect.gen(function*() {
    const redis = yield* connect
    const source = yield* RedisStreamQueue.make<Body>({
      redis,
      stream: freshStream(),
      visibilityTimeout: "10 seconds",
      reclaimInterval: "1 millis"
    })
    yield* source.send([msg("a")])
    const [a] = yield* source.receive(5)
    return { a, redis, source }
  })

  describe(`RedisStreamQueue (${name})`, () => {
    it.live("XREADGROUP claims once per group; XAUTOCLAIM takes over a dead consumer's entries after the timeout", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const options = { redis, stream, visibilityTimeout: "300 millis", reclaimInterval: "20 millis" } as const
        const dead = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "dead" })
        yield* dead.send([msg("a", 1), { id: "b", key: "k", body: { n: 2 } }, msg("c", 3)])
        const beforeReceive = Date.now()
        const held = yield* dead.receive(2) // ...and the process died
        expect(held.map((m) => [m.id, m.receiveCount])).toEqual([["a", 1], ["b", 1]])
        expect(held[1]!.key).toBe("k")

        const alive = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "alive" })
        const applied: Array<string> = []
        const appliedAfter = new Map<string, number>()
        const consumer = yield* Consumer.run({
          source: alive,
          handler: yield* Consumer.idempotentMemory((m) =>
            Effect.sync(() => {
              applied.push(`${m.id}#${m.receiveCount}`)
              appliedAfter.set(m.id, elapsedSince(beforeReceive))
            })
          ),
          maxReceiveCount: 5,
          pollInterval: "10 millis"
        })
        yield* eventually(Effect.map(consumer.stats, (s) => s.processed >= 3))
        // c was delivered once; the delivery count of a and b came from the pending entries list
        expect(applied.sort()).toEqual(["a#2", "b#2", "c#1"])
        // taken over only after a whole visibility timeout pending (counted from before they were received)
        expect(appliedAfter.get("a")).toBeGreaterThanOrEqual(300)
        expect(appliedAfter.get("b")).toBeGreaterThanOrEqual(300)
        // the dead consumer's receipts are stale now
        expect(yield* dead.release(held[0]!)).toBe(false)
        expect(yield* dead.deadLetter(held[0]!, "stale")).toBe(false)
        expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
        expect((yield* Effect.promise(() => redis.xpending(stream, "consumers")))[0]).toBe(0)
      }).pipe(Effect.scoped))

    it.live("ackMany: one script for the group, each receipt fenced on its own; the acked ones' errors go too", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const options = { redis, stream, visibilityTimeout: "10 seconds", reclaimInterval: "1 millis" } as const
        const source = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "one" })
        const other = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "two" })
        yield* source.send([msg("a"), msg("b"), msg("c"), msg("d")])
        const [a, b, c] = yield* source.receive(3)
        const [d] = yield* other.receive(1)
        // a released with an error and received again: its first receipt is stale, the error is remembered
        expect(yield* source.release(a!, { error: "boom" })).toBe(true)
        const [again] = yield* source.receive(1)
        expect(again).toMatchObject({ id: "a", receiveCount: 2, lastError: "boom" })
        const answers = yield* source.ackMany!([a!, again!, again!, b!, d!, c!])
        // stale, acked, the same again, acked, another consumer's, acked
        expect(answers).toEqual([false, true, false, true, false, true])
        // a receipt that is not one of ours fails the call, as `ack` does, and nothing of it is acked
        expect(Exit.isFailure(yield* Effect.exit(other.ackMany!([{ ...d!, receipt: "not-an-id:1" }])))).toBe(true)
        expect(yield* other.ackMany!([d!])).toEqual([true])
        expect(yield* source.ackMany!([])).toEqual([])
        expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
        expect((yield* Effect.promise(() => redis.xpending(stream, "consumers")))[0]).toBe(0)
        const { errors } = streamKeys(stream, redis.isCluster === true)
        expect(yield* Effect.promise(() => redis.hlen(errors))).toBe(0)
      }).pipe(Effect.scoped))

    it.live("crash attribution (issue 31): a delivery lost beside others is given back, one lost alone is charged", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const options = { redis, stream, visibilityTimeout: "300 millis", reclaimInterval: "1 millis" } as const
        const source = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "one" })
        const alone = { runsSuspectsAlone: true } as const
        const { deliveries } = streamKeys(stream, redis.isCluster === true)
        /** The message's next delivery, once the last one is lost (its idle time reaches the timeout). */
        const next = (options?: QueueSource.ReceiveOptions) => {
          let got: QueueSource.Message<Body> | undefined
          return Effect.map(
            eventually(Effect.map(source.receive(1, options), (ms) => (got = ms[0]) !== undefined)),
            () => got!
          )
        }
        // a loop of your own (a plain receive): every lost delivery counts, as it always did
        yield* source.send([msg("plain")])
        yield* source.receive(1)
        const plain = yield* next()
        expect([plain.receiveCount, plain.suspect]).toEqual([2, true])
        expect(yield* source.ack(plain)).toBe(true)

        yield* source.send([msg("a")])
        const [first] = yield* source.receive(1, alone)
        expect([first!.receiveCount, first!.suspect]).toEqual([1, false])
        // lost while merely claimed: its receive is given back, and it is a suspect
        const second = yield* next(alone)
        expect([second.receiveCount, second.suspect]).toEqual([1, true])
        expect(yield* source.markAlone!(first!)).toBe(false) // stale
        expect(yield* source.markAlone!(second)).toBe(true)
        // lost while running alone: charged
        const third = yield* next(alone)
        expect([third.receiveCount, third.suspect]).toEqual([2, true])
        // given back unprocessed: the receive undone, still a suspect; a verdict then clears it
        expect(yield* source.release(third, { undoReceive: true })).toBe(true)
        const fourth = yield* next(alone)
        expect([fourth.receiveCount, fourth.suspect]).toEqual([2, true])
        expect(yield* source.release(fourth, { error: "boom" })).toBe(true)
        const fifth = yield* next(alone)
        expect([fifth.receiveCount, fifth.suspect, fifth.lastError]).toEqual([3, false, "boom"])
        // acknowledged, nothing of it is left behind
        expect(yield* source.ack(fifth)).toBe(true)
        expect(yield* Effect.promise(() => redis.hlen(deliveries))).toBe(0)
        // a plain receive's new entries are stored charged; a dead-lettered one leaves nothing behind either
        yield* source.send([msg("b")])
        const [b] = yield* source.receive(1)
        expect(yield* Effect.promise(() => redis.hlen(deliveries))).toBe(1)
        expect(yield* source.deadLetter(b!, "done")).toBe(true)
        expect(yield* Effect.promise(() => redis.hlen(deliveries))).toBe(0)
      }).pipe(Effect.scoped))

    it.live("release: visible again after the delay, with the error remembered; undoReceive keeps the count", () =>
      Effect.gen(function*() {
        const { a, source } = yield* oneReceived
        const beforeRelease = Date.now()
        expect(yield* source.release(a!, { delay: "200 millis", error: "boom" })).toBe(true)
        // polled until it is back: it must not be back before the delay (however slow the polling)
        let again: QueueSource.Message<Body> | undefined
        yield* eventually(Effect.map(source.receive(5), (got) => (again = got[0]) !== undefined))
        expect(elapsedSince(beforeRelease)).toBeGreaterThanOrEqual(200)
        expect(again).toMatchObject({ id: "a", receiveCount: 2, lastError: "boom" })
        expect(yield* source.release(again!, { undoReceive: true })).toBe(true)
        const [third] = yield* source.receive(5)
        expect(third).toMatchObject({ id: "a", receiveCount: 2 })
        expect(yield* source.ack(third!)).toBe(true)
        expect(yield* source.ack(third!)).toBe(false)
      }).pipe(Effect.scoped))

    it.live("dead letters: atomic move, list, inspect, redrive, purge, depth; redriven messages are processed once", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const source = yield* RedisStreamQueue.make<Body>({ redis, stream, visibilityTimeout: "10 seconds" })
        yield* source.send([msg("ok-1", 1), msg("bad-1", -1), { id: "bad-2", key: "k", body: { n: -2 } }])
        let fixed = false
        const applied = new Map<string, number>()
        const handler = yield* Consumer.idempotentMemory((m: QueueSource.Message<Body>) =>
          m.body.n < 0 && !fixed
            ? Effect.fail(Failure.fatal(`negative amount ${m.body.n}`))
            : Effect.sync(() => void applied.set(m.id, (applied.get(m.id) ?? 0) + 1))
        )
        const first = yield* Scope.make()
        const c1 = yield* Consumer.run({ source, handler, maxReceiveCount: 3, pollInterval: "10 millis" }).pipe(
          provideScope(first)
        )
        yield* eventually(Effect.map(c1.stats, (s) => s.processed + s.deadLettered === 3))
        yield* Scope.close(first, Exit.void)

        expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
        expect(yield* source.deadLetters.depth).toBe(2)
        const listed = yield* source.deadLetters.list()
        expect(listed.map((d) => d.id)).toEqual(["bad-1", "bad-2"])
        expect(listed[1]).toMatchObject({
          id: "bad-2",
          key: "k",
          body: { n: -2 },
          reason: "Fatal: fatal failure: negative amount -2",
          receiveCount: 1
        })
        expect(listed[1]!.lastSeenAt).toBeGreaterThanOrEqual(listed[1]!.firstSeenAt)
        expect(Option.getOrThrow(yield* source.deadLetters.inspect("bad-1")).body).toEqual({ n: -1 })
        expect(Option.isNone(yield* source.deadLetters.inspect("nope"))).toBe(true)

        fixed = true
        expect(yield* source.deadLetters.redrive(["bad-1", "nope"])).toBe(1)
        const second = yield* Scope.make()
        const c2 = yield* Consumer.run({ source, handler, maxReceiveCount: 3, pollInterval: "10 millis" }).pipe(
          provideScope(second)
        )
        yield* eventually(Effect.map(c2.stats, (s) => s.processed === 1))
        expect(yield* source.deadLetters.redrive()).toBe(1)
        yield* eventually(Effect.map(c2.stats, (s) => s.processed === 2))
        yield* Scope.close(second, Exit.void)
        expect(Object.fromEntries(applied)).toEqual({ "ok-1": 1, "bad-1": 1, "bad-2": 1 })
        expect(yield* source.deadLetters.depth).toBe(0)

        // purge
        yield* source.send([msg("x")])
        const [x] = yield* source.receive(1)
        yield* source.deadLetter(x!, "manual")
        expect(yield* source.deadLetters.purge(["x"])).toBe(1)
        yield* source.send([msg("y")])
        const [y] = yield* source.receive(1)
        yield* source.deadLetter(y!, "manual")
        expect(yield* source.deadLetters.purge()).toBe(1)
        expect(yield* source.deadLetters.depth).toBe(0)
      }).pipe(Effect.scoped))

    it.live("a body that is not JSON goes to the DLQ on receive or reclaim (raw text kept); the rest runs", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        // a visibility timeout no busy machine outlasts: the dead consumer's entry is aged by hand below
        const options = { redis, stream, visibilityTimeout: "10 seconds", reclaimInterval: "10 millis" } as const
        const source = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "alive" })
        // written by some other producer, or by hand
        yield* Effect.promise(() => redis.xadd(stream, "*", "id", "bad", "body", "hello"))
        yield* source.send([msg("good-1", 1)])
        yield* Effect.promise(() => redis.xadd(stream, "*", "id", "no-body"))
        const got = yield* source.receive(10)
        expect(got.map((m) => [m.id, m.body.n])).toEqual([["good-1", 1]])
        expect(yield* source.ack(got[0]!)).toBe(true)
        const listed = yield* source.deadLetters.list()
        expect(listed.map((d) => [d.id, d.body])).toEqual([["bad", "hello"], ["no-body", ""]])
        expect(listed[0]!.reason).toMatch(/^corrupt body: .*JSON/)
        expect(listed[1]!.reason).toBe("corrupt body: the entry has no body field")
        expect(Option.getOrThrow(yield* source.deadLetters.inspect("bad")).body).toBe("hello")
        expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
        expect((yield* Effect.promise(() => redis.xpending(stream, "consumers")))[0]).toBe(0)

        // a corrupt entry held by a consumer that died is dead-lettered when it is taken over
        yield* Effect.promise(() => redis.xadd(stream, "*", "id", "bad-2", "body", "{"))
        const read = yield* Effect.promise(() =>
          redis.call("XREADGROUP", "GROUP", "consumers", "dead", "COUNT", 1, "STREAMS", stream, ">") as Promise<
            [[string, [[string, Array<string>]]]]
          >
        )
        // ...an hour ago (XCLAIM ... IDLE sets how long the entry has been pending)
        yield* Effect.promise(() =>
          redis.call("XCLAIM", stream, "consumers", "dead", 0, read[0][1][0][0], "IDLE", 3_600_000, "JUSTID")
        )
        yield* source.send([msg("good-2", 2)])
        const handled: Array<string> = []
        const scope = yield* Scope.make()
        const consumer = yield* Consumer.run({
          source,
          handler: (m) => Effect.sync(() => handled.push(m.id)),
          maxReceiveCount: 3,
          pollInterval: "10 millis"
        }).pipe(provideScope(scope))
        yield* eventually(Effect.map(source.deadLetters.depth, (n) => n === 3))
        yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 1))
        yield* Scope.close(scope, Exit.void)
        expect(handled).toEqual(["good-2"])
        expect((yield* source.deadLetters.list()).map((d) => d.id)).toEqual(["bad", "no-body", "bad-2"])
        expect((yield* Effect.promise(() => redis.xpending(stream, "consumers")))[0]).toBe(0)
      }).pipe(Effect.scoped))

    it.live("send rejects a body JSON cannot carry, writing nothing; visibility under 1 ms is rejected", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const source = yield* RedisStreamQueue.make<unknown>({ redis, stream, visibilityTimeout: "1 second" })
        const error = yield* Effect.flip(source.send([{ id: "ok", body: 1 }, { id: "u", body: undefined }]))
        expect(error._tag).toBe("QueueError")
        expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
        expect(() => RedisStreamQueue.make({ redis, stream, visibilityTimeout: "0.5 millis" })).toThrow(
          /at least 1 millisecond/
        )
      }).pipe(Effect.scoped))

    it.live("scripts run as EVALSHA and are reloaded after SCRIPT FLUSH (NOSCRIPT)", () =>
      Effect.gen(function*() {
        const { a, redis, source } = yield* oneReceived
        // every node: on a Cluster, the stream's node is one of them
        yield* Effect.promise(() => Promise.all(serversOf(redis).map((s) => s.script("FLUSH"))))
        expect(yield* source.release(a!, { undoReceive: true })).toBe(true)
        const [again] = yield* source.receive(5)
        expect(again).toMatchObject({ id: "a", receiveCount: 1 })
        // the fallback EVAL cached the script: the next call's EVALSHA finds it
        const cached = yield* Effect.promise(() =>
          Promise.all(serversOf(redis).map((s) => s.script("EXISTS", RELEASE.sha) as Promise<Array<number>>))
        )
        expect(cached.map(([n]) => n)).toContain(1)
        expect(yield* source.ack(again!)).toBe(true)
      }).pipe(Effect.scoped))

    it.live("fractional milliseconds: the visibility timeout is rounded up for XAUTOCLAIM", () =>
      Effect.gen(function*() {
        const redis = yield* connect
        const stream = freshStream()
        const options = { redis, stream, visibilityTimeout: "100.5 millis", reclaimInterval: "10 millis" } as const
        const dead = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "dead" })
        const alive = yield* RedisStreamQueue.make<Body>({ ...options, consumer: "alive" })
        expect(Duration.toMillis(alive.visibilityTimeout)).toBe(101)
        yield* dead.send([msg("a")])
        const beforeReceive = Date.now()
        yield* dead.receive(1)
        let a: QueueSource.Message<Body> | undefined
        yield* eventually(Effect.map(alive.receive(1), (got) => (a = got[0]) !== undefined))
        expect(elapsedSince(beforeReceive)).toBeGreaterThanOrEqual(101)
        expect(a).toMatchObject({ id: "a", receiveCount: 2 })
        const beforeRelease = Date.now()
        expect(yield* alive.release(a!, { delay: Duration.millis(30.5) })).toBe(true)
        let b: QueueSource.Message<Body> | undefined
        yield* eventually(Effect.map(alive.receive(1), (got) => (b = got[0]) !== undefined))
        expect(elapsedSince(beforeRelease)).toBeGreaterThanOrEqual(31)
        expect(b).toMatchObject({ id: "a", receiveCount: 3 })
      }).pipe(Effect.scoped))

    it.live(
      "redrive() and purge() with no ids cover the DLQ as it was, and always make progress",
      () =>
        Effect.gen(function*() {
          const redis = yield* connect
          const stream = freshStream()
          const { dlq } = streamKeys(stream, redis.isCluster)
          const source = yield* RedisStreamQueue.make<Body>({ redis, stream, visibilityTimeout: "10 seconds" })
          // an entry with no index entry (written by hand) and a stale duplicate the index does not point at
          yield* Effect.promise(() => redis.xadd(dlq, "*", "id", "orphan", "body", "{\"n\":1}", "reason", "by hand"))
          yield* source.send([msg("dup", 1), msg("dup", 2)])
          const [d1, d2] = yield* source.receive(2)
          yield* source.deadLetter(d1!, "first")
          const stale = (yield* Effect.promise(() => redis.xrange(dlq, "-", "+")))[1]!
          yield* source.deadLetter(d2!, "second")
          yield* Effect.promise(() => redis.xadd(dlq, "*", ...stale[1]))
          expect(yield* source.deadLetters.depth).toBe(3)
          const bounded = <A, E>(effect: Effect.Effect<A, E>) =>
            queueTimeoutFail("5 seconds", () => new Error("never finished"))(effect)
          // the current dup goes back; the entries the index does not point at are only deleted
          expect(yield* bounded(source.deadLetters.redrive())).toBe(1)
          expect(yield* source.deadLetters.depth).toBe(0)
          const back = yield* source.receive(10)
          expect(back.map((m) => [m.id, m.body.n])).toEqual([["dup", 2]])
          yield* Effect.promise(() => redis.xadd(dlq, "*", "id", "orphan-2", "body", "{}", "reason", "by hand"))
          expect(yield* bounded(source.deadLetters.purge())).toBe(1)
          expect(yield* source.deadLetters.depth).toBe(0)

          // a consumer that dead-letters every redriven message again: redrive() moves what was there once
          const stream2 = freshStream()
          const poisoned = yield* RedisStreamQueue.make<Body>({
            redis,
            stream: stream2,
            visibilityTimeout: "10 seconds"
          })
          const n = 600
          yield* poisoned.send(Array.from({ length: n }, (_, i) => msg(`p-${i}`, i)))
          const consumer = yield* Consumer.run({
            source: poisoned,
            handler: () => Effect.fail(Failure.fatal("still broken")),
            maxReceiveCount: 3,
            concurrency: 16,
            pollInterval: "1 millis"
          })
          yield* eventually(Effect.map(consumer.stats, (s) => s.deadLettered === n))
          const moved = yield* bounded(poisoned.deadLetters.redrive())
          expect(moved).toBe(n)
        }).pipe(Effect.scoped)
    )

    it.live(
      `soak: ${
        soakMessages.toLocaleString("en")
      } messages, poison, random failures and crashes — exactly once, nothing lost`,
      () =>
        Effect.flatMap(tempDir, (dir) =>
          Effect.gen(function*() {
            const redis = yield* connect
            const sql = yield* SqlClient.SqlClient
            const stream = freshStream()
            yield* ConsumerSql.createProcessedTable("processed")
            yield* sql`CREATE TABLE effects (id TEXT NOT NULL)`
            const source = yield* RedisStreamQueue.make<Body>({
              redis,
              stream,
              visibilityTimeout: "1 second",
              reclaimInterval: "100 millis",
              name: `soak-${name.replace(/\W+/g, "-")}`
            })
            const started = Date.now()
            const result = yield* runSoak<SqlClient.SqlClient>({
              source,
              idempotent: (h) => ConsumerSql.idempotent(h, { table: "processed" }),
              record: (id) => sql`INSERT INTO effects (id) VALUES (${id})`,
              effects: Effect.map(
                sql<{ readonly id: string; readonly n: number }>`SELECT id, count(*) AS n FROM effects GROUP BY id`,
                (rows) => new Map(rows.map((r) => [r.id, Number(r.n)]))
              ),
              remaining: Effect.promise(async () =>
                (await redis.xlen(stream)) + Number((await redis.xpending(stream, "consumers"))[0])
              ),
              transactional: true
            }, {
              n: soakMessages,
              seed: 13,
              prefix: "redis",
              concurrency: 16,
              maxReceiveCount: 5,
              timeout: "10 seconds",
              tick: Effect.sleep("50 millis"),
              maxTicks: 2_400
            })
            console.log(`[soak ${name}]`, JSON.stringify({ ...result, seconds: (Date.now() - started) / 1000 }))
          }).pipe(Effect.scoped, Effect.provide(queueSqlite(join(dir, "soak.db"))))).pipe(Effect.scoped),
      150_000
    )
  })
}
