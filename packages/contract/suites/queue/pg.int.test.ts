/**
 * `PgQueue` against a real PostgreSQL: claiming, visibility by the caller's Clock (TestClock drives it),
 * dead letters, the SQL idempotent consumer, recovery of a consumer that died holding messages, and the
 * 10,000-message soak. Every test uses its own tables and drops them.
 */
import {
  describePg,
  eventually,
  provideScope,
  queueLive,
  queuePgClient,
  queueSleepLive,
  SqlClientModule as SqlClient,
  TestClock,
  yieldNow
} from "#edition"
import { expect, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Option, Scope } from "effect"
import { Consumer, Failure, type QueueSource } from "effect-resilience"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import * as PgQueue from "effect-resilience/PgQueue"
import { pgTables } from "./pgTables.js"
import { type Body, runSoak } from "./soak.js"

const { fresh } = pgTables()

const settle = Effect.repeat(yieldNow, { times: 20 })
/** Real waiting, for the database to answer, while TestClock stands still. */
const pause = (ms: number) => queueSleepLive(`${ms} millis`)

const msg = (id: string, n = 0) => ({ id, body: { n } })

const count = (table: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => Effect.map(sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM ${sql(table)}`, (r) => r[0]!.n)
  )

describePg("PgQueue", () => {
  layer(queuePgClient, { timeout: "30 seconds" })((it) => {
    it.effect("claims with SKIP LOCKED; visibility by the caller's Clock; stale receipts are fenced", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        const t0 = yield* Clock.currentTimeMillis
        yield* source.send([msg("a", 1), { id: "b", key: "k", body: { n: 2 } }])
        const first = yield* source.receive(1)
        expect(first.map((m) => [m.id, m.receiveCount, m.body.n])).toEqual([["a", 1, 1]])
        // two concurrent receivers never get the same row
        const [x, y] = yield* Effect.all([source.receive(5), source.receive(5)], { concurrency: 2 })
        expect([...x, ...y].map((m) => m.id)).toEqual(["b"])
        expect([...x, ...y][0]!.key).toBe("k")
        yield* TestClock.adjust("999 millis")
        expect(yield* source.receive(10)).toEqual([])
        yield* TestClock.adjust("1 millis")
        const again = yield* source.receive(10)
        expect(again.map((m) => [m.id, m.receiveCount]).sort()).toEqual([["a", 2], ["b", 2]])
        expect(again[0]!.receivedAt).toBe(t0 + 1000)
        expect(yield* source.release(first[0]!)).toBe(false)
        expect(yield* source.deadLetter(first[0]!, "stale")).toBe(false)
        const a = again.find((m) => m.id === "a")!
        expect(yield* source.release(a, { delay: "5 seconds", error: "boom" })).toBe(true)
        yield* TestClock.adjust("4 seconds")
        expect((yield* source.receive(10)).map((m) => m.id)).toEqual(["b"]) // b's visibility ran out too
        yield* TestClock.adjust("1 second")
        const [late] = yield* source.receive(10)
        expect(late).toMatchObject({ id: "a", receiveCount: 3, lastError: "boom" })
        expect(yield* source.ack(late!)).toBe(true)
        expect(yield* source.ack(late!)).toBe(false)
      }))

    it.effect("concurrent acks, each fenced on its own: stale and repeated receipts match nothing", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        yield* source.send([msg("a"), msg("b"), msg("c"), msg("d")])
        const first = yield* source.receive(4)
        yield* TestClock.adjust("1 second")
        const [again] = yield* source.receive(1) // a second delivery of the oldest: its first receipt is stale
        const stale = first.find((m) => m.id === again!.id)!
        const others = first.filter((m) => m !== stale)
        const results = yield* Effect.all([
          source.ack(stale),
          source.ack(again!),
          source.ack(again!),
          ...others.map((m) => source.ack(m)),
          Effect.exit(source.ack({ ...stale, receipt: "not-a-seq:1" }))
        ], { concurrency: "unbounded" })
        expect(results[0]).toBe(false)
        expect(results.slice(1, 3).filter((acked) => acked === true)).toHaveLength(1)
        expect(results.slice(3, 6)).toEqual([true, true, true])
        expect(Exit.isFailure(results[6] as Exit.Exit<boolean, unknown>)).toBe(true)
        expect(yield* count(table)).toBe(0)
      }))

    it.effect("an ack inside the caller's transaction rolls back with it, while other acks are under way", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const sql = yield* SqlClient.SqlClient
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 minute" })
        yield* source.send(Array.from({ length: 21 }, (_, i) => msg(`m${i}`)))
        const [mine, ...others] = yield* source.receive(21)
        // the caller deletes its message and writes its own rows in one transaction, which then fails: neither
        // may stay done, whatever other fibers ack at the same moment
        const inTransaction = sql.withTransaction(Effect.andThen(source.ack(mine!), Effect.fail("rolled back")))
        const results = yield* Effect.all([
          Effect.exit(inTransaction),
          ...others.map((m) => source.ack(m))
        ], { concurrency: "unbounded" })
        expect(results.slice(1)).toEqual(others.map(() => true))
        expect(yield* count(table)).toBe(1)
        expect((yield* source.receive(1)).map((m) => m.id)).toEqual([]) // still in flight, not lost
      }))

    it.effect("ackMany: one statement for a group, each receipt fenced on its own, never in the caller's transaction", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const sql = yield* SqlClient.SqlClient
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        yield* source.send([msg("a"), msg("b"), msg("c"), msg("d")])
        const first = yield* source.receive(4)
        yield* TestClock.adjust("1 second")
        const [again] = yield* source.receive(1)
        const stale = first.find((m) => m.id === again!.id)!
        const others = first.filter((m) => m !== stale)
        // the consumer's own acks: sent on a connection of their own, so a transaction around them cannot undo them
        let answers: ReadonlyArray<boolean> = []
        const group = Effect.tap(source.ackMany!([stale, again!, again!, ...others]), (a) =>
          Effect.sync(() => {
            answers = a
          }))
        expect(Exit.isFailure(yield* Effect.exit(sql.withTransaction(Effect.andThen(group, Effect.fail("no")))))).toBe(
          true
        )
        expect(answers).toEqual([false, true, false, true, true, true])
        expect(yield* count(table)).toBe(0)
        yield* source.send([msg("e")])
        const [e] = yield* source.receive(1)
        expect(yield* source.ackMany!([again!, e!])).toEqual([false, true])
        expect(yield* source.ackMany!([])).toEqual([])
        expect(Exit.isFailure(yield* Effect.exit(source.ackMany!([{ ...e!, receipt: "not-a-seq:1" }])))).toBe(true)
      }))

    it.effect("dead letters: atomic move, list, inspect, redrive, purge, depth", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 minute" })
        const t0 = yield* Clock.currentTimeMillis // TestClock time carries over between the tests of a layer
        yield* source.send([msg("a", 1), msg("b", 2), msg("c", 3)])
        yield* TestClock.adjust("2 seconds")
        for (const m of yield* source.receive(3)) expect(yield* source.deadLetter(m, `bad ${m.id}`)).toBe(true)
        expect(yield* count(table)).toBe(0)
        expect(yield* source.deadLetters.depth).toBe(3)
        const listed = yield* source.deadLetters.list()
        expect(listed.map((d) => d.id)).toEqual(["a", "b", "c"])
        expect(listed[0]).toEqual({
          id: "a",
          key: undefined,
          body: { n: 1 },
          reason: "bad a",
          receiveCount: 1,
          firstSeenAt: t0,
          lastSeenAt: t0 + 2000,
          deadLetteredAt: t0 + 2000
        })
        expect(Option.getOrThrow(yield* source.deadLetters.inspect("b")).reason).toBe("bad b")
        expect(Option.isNone(yield* source.deadLetters.inspect("nope"))).toBe(true)
        expect(yield* source.deadLetters.redrive(["a", "nope"])).toBe(1)
        const [back] = yield* source.receive(10)
        expect(back).toMatchObject({ id: "a", body: { n: 1 }, receiveCount: 1 })
        expect(yield* source.deadLetters.purge(["b"])).toBe(1)
        expect(yield* source.deadLetters.redrive()).toBe(1)
        expect(yield* source.deadLetters.depth).toBe(0)
        expect(yield* count(table)).toBe(2)
      }))

    it.effect("idempotent: the processed id and the handler's writes commit together, or not at all", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const processed = fresh("processed")
        const ledger = fresh("ledger")
        yield* ConsumerSql.createProcessedTable(processed)
        yield* sql`CREATE TABLE ${sql(ledger)} (message_id TEXT NOT NULL, amount INT NOT NULL)`
        let fail = true
        const handler = ConsumerSql.idempotent((m: QueueSource.Message<Body>) =>
          Effect.gen(function*() {
            yield* sql`INSERT INTO ${sql(ledger)} ${sql.insert({ message_id: m.id, amount: m.body.n })}`
            if (fail) return yield* Effect.fail(Failure.retryable("later"))
            return m.body.n
          }), { table: processed })
        const m = { ...msg("pay-1", 5), key: undefined, receiveCount: 1, enqueuedAt: 0, receivedAt: 0 }
        const delivery = { ...m, lastError: undefined, receipt: "0:0" }
        expect((yield* Effect.flip(handler(delivery)))._tag).toBe("Retryable")
        expect(yield* count(ledger)).toBe(0) // rolled back
        expect(yield* count(processed)).toBe(0)
        fail = false
        expect(yield* handler(delivery)).toEqual(Option.some(5))
        expect(yield* handler(delivery)).toEqual(Option.none()) // the redelivery is skipped
        // two concurrent deliveries: the second waits on the first's key, then skips
        const m2 = { ...delivery, id: "pay-2" }
        const both = yield* Effect.all([handler(m2), handler(m2)], { concurrency: 2 })
        expect(both.filter(Option.isSome)).toHaveLength(1)
        expect(yield* count(ledger)).toBe(2)
        expect(yield* count(processed)).toBe(2)
      }))

    it.effect("a consumer that died holding messages: they come back after the visibility timeout, once", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const processed = fresh("processed")
        yield* ConsumerSql.createProcessedTable(processed)
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "30 seconds" })
        yield* source.send([msg("a"), msg("b"), msg("c")])
        const held = yield* source.receive(2) // ...and the process died
        expect(held).toHaveLength(2)
        const applied: Array<string> = []
        const scope = yield* Scope.make()
        const consumer = yield* Consumer.run({
          source,
          handler: ConsumerSql.idempotent((m) => Effect.sync(() => applied.push(`${m.id}#${m.receiveCount}`)), {
            table: processed
          }),
          maxReceiveCount: 5,
          concurrency: 2
        }).pipe(provideScope(scope))
        yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 1))
        expect(applied).toEqual(["c#1"])
        yield* TestClock.adjust("29 seconds")
        yield* settle
        yield* pause(100)
        expect((yield* consumer.stats).processed).toBe(1)
        // the consumer may still be in a poll that read the time before the clock moved, and then sleep
        // from the later time: keep the clock moving until it has taken them over
        yield* eventually(
          Effect.andThen(TestClock.adjust("100 millis"), Effect.map(consumer.stats, (s) => s.processed === 3))
        )
        expect(applied.sort()).toEqual(["a#2", "b#2", "c#1"])
        yield* Scope.close(scope, Exit.void)
        expect(yield* count(table)).toBe(0)
      }))

    it.effect("crash attribution (issue 31): a delivery lost beside others is given back, one lost alone is charged", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        const alone = { runsSuspectsAlone: true } as const
        // a loop of your own (a plain receive): every lost delivery counts, as it always did
        yield* source.send([msg("plain")])
        yield* source.receive(1)
        yield* TestClock.adjust("1 second")
        const [plain] = yield* source.receive(1)
        expect([plain!.receiveCount, plain!.suspect]).toEqual([2, true])
        expect(yield* source.ack(plain!)).toBe(true)

        yield* source.send([msg("a")])
        const [first] = yield* source.receive(1, alone)
        expect([first!.receiveCount, first!.suspect]).toEqual([1, false])
        yield* TestClock.adjust("1 second")
        // lost while merely claimed: its receive is given back, and it is a suspect
        const [second] = yield* source.receive(1, alone)
        expect([second!.receiveCount, second!.suspect]).toEqual([1, true])
        expect(yield* source.markAlone!(first!)).toBe(false) // stale
        yield* TestClock.adjust("900 millis")
        // the mark extends the delivery, as `extend` does
        expect(yield* source.markAlone!(second!)).toBe(true)
        yield* TestClock.adjust("999 millis")
        expect(yield* source.receive(1, alone)).toEqual([])
        yield* TestClock.adjust("1 millis")
        // lost while running alone: charged
        const [third] = yield* source.receive(1, alone)
        expect([third!.receiveCount, third!.suspect]).toEqual([2, true])
        // given back unprocessed: the receive undone, still a suspect; a verdict then clears it
        expect(yield* source.release(third!, { undoReceive: true })).toBe(true)
        const [fourth] = yield* source.receive(1, alone)
        expect([fourth!.receiveCount, fourth!.suspect]).toEqual([2, true])
        expect(yield* source.release(fourth!, { error: "boom" })).toBe(true)
        const [fifth] = yield* source.receive(1, alone)
        expect([fifth!.receiveCount, fifth!.suspect, fifth!.lastError]).toEqual([3, false, "boom"])
        expect(yield* source.deadLetter(fifth!, "done")).toBe(true)
        expect(Option.getOrThrow(yield* source.deadLetters.inspect("a")).receiveCount).toBe(3)
      }))

    it.effect("a table made by an earlier version gets the crash attribution's columns when make runs", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const sql = yield* SqlClient.SqlClient
        // the DDL as it was: no delivery_state, no suspect; one message in flight
        const [create, ...rest] = PgQueue.migrations(table)
        yield* sql.unsafe(create!.replace(/,\s*delivery_state[^,]*,\s*suspect [^)]*\)/, "\n)"))
        const columns = sql<{ readonly name: string }>`SELECT attname AS name FROM pg_attribute
          WHERE attrelid = to_regclass(${table}) AND attnum > 0 AND NOT attisdropped`
        expect((yield* columns).map((c) => c.name)).not.toContain("suspect")
        yield* sql.unsafe(`INSERT INTO "${table}" (id, body, enqueued_at, visible_at, receive_count, token)
          VALUES ('old', '{"n":1}', 0, 0, 1, 1)`)
        for (const statement of rest) yield* sql.unsafe(statement)
        expect((yield* columns).map((c) => c.name)).toEqual(expect.arrayContaining(["delivery_state", "suspect"]))
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        // a delivery made by the earlier version is judged as charged: it was never marked claimed
        const [old] = yield* source.receive(1, { runsSuspectsAlone: true })
        expect([old!.id, old!.receiveCount, old!.suspect]).toEqual(["old", 2, false])
      }))

    it.effect("poison messages go to the DLQ; redriven after a fix, they are processed once", () =>
      Effect.gen(function*() {
        const table = fresh("q")
        const processed = fresh("processed")
        yield* ConsumerSql.createProcessedTable(processed)
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "30 seconds" })
        yield* source.send([msg("ok-1", 1), msg("bad-1", -1), msg("bad-2", -2), msg("ok-2", 2)])
        let fixed = false
        const applied = new Map<string, number>()
        const handler = ConsumerSql.idempotent((m: QueueSource.Message<Body>) =>
          m.body.n < 0 && !fixed
            ? Effect.fail(Failure.fatal(`negative amount ${m.body.n}`))
            : Effect.sync(() => void applied.set(m.id, (applied.get(m.id) ?? 0) + 1)), { table: processed })
        const first = yield* Scope.make()
        const c1 = yield* Consumer.run({ source, handler, maxReceiveCount: 3 }).pipe(provideScope(first))
        yield* eventually(Effect.map(c1.stats, (s) => s.processed + s.deadLettered === 4))
        yield* Scope.close(first, Exit.void)
        expect(yield* source.deadLetters.depth).toBe(2)
        const entry = Option.getOrThrow(yield* source.deadLetters.inspect("bad-1"))
        expect(entry.reason).toBe("Fatal: fatal failure: negative amount -1")
        fixed = true
        expect(yield* source.deadLetters.redrive()).toBe(2)
        expect(yield* source.deadLetters.depth).toBe(0)
        const second = yield* Scope.make()
        const c2 = yield* Consumer.run({ source, handler, maxReceiveCount: 3 }).pipe(provideScope(second))
        yield* eventually(Effect.map(c2.stats, (s) => s.processed === 2))
        yield* Scope.close(second, Exit.void)
        expect(Object.fromEntries(applied)).toEqual({ "ok-1": 1, "ok-2": 1, "bad-1": 1, "bad-2": 1 })
        expect(yield* count(table)).toBe(0)
      }))

    it.effect("a body that is not JSON goes to the DLQ on receive (raw text kept); the rest of the batch runs", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const table = fresh("corrupt")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 second" })
        yield* source.send([msg("good-1", 1)])
        // written by some other producer, or by hand
        yield* sql`INSERT INTO ${sql(table)} (id, body, enqueued_at, visible_at) VALUES ('bad', 'not json', 0, 0)`
        yield* source.send([msg("good-2", 2)])
        const got = yield* source.receive(10)
        expect(got.map((m) => [m.id, m.body.n])).toEqual([["good-1", 1], ["good-2", 2]])
        expect(yield* source.deadLetters.depth).toBe(1)
        const [dead] = yield* source.deadLetters.list()
        expect(dead).toMatchObject({ id: "bad", body: "not json", receiveCount: 1 })
        expect(dead!.reason).toMatch(/^corrupt body: .*JSON/)
        expect(Option.getOrThrow(yield* source.deadLetters.inspect("bad")).body).toBe("not json")
        for (const m of got) expect(yield* source.ack(m)).toBe(true)
        expect(yield* count(table)).toBe(0)
        // through a consumer: the good messages run, nothing is left behind
        yield* sql`INSERT INTO ${sql(table)} (id, body, enqueued_at, visible_at) VALUES ('bad-2', '{"n":', 0, 0)`
        yield* source.send([msg("good-3", 3)])
        const handled: Array<string> = []
        const scope = yield* Scope.make()
        const consumer = yield* provideScope(scope)(
          Consumer.run({ source, handler: (m) => Effect.sync(() => handled.push(m.id)), maxReceiveCount: 3 })
        )
        yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 1))
        yield* Scope.close(scope, Exit.void)
        expect(handled).toEqual(["good-3"])
        expect(yield* count(table)).toBe(0)
        expect((yield* source.deadLetters.list()).map((d) => d.id)).toEqual(["bad", "bad-2"])
      }))

    it.effect("send rejects a body JSON cannot carry, writing nothing", () =>
      Effect.gen(function*() {
        const table = fresh("unjson")
        const source = yield* PgQueue.make<unknown>({ table, visibilityTimeout: "1 second" })
        const error = yield* Effect.flip(source.send([{ id: "ok", body: 1 }, { id: "u", body: undefined }]))
        expect(error).toMatchObject({ _tag: "QueueError", operation: "send" })
        const cyclic: Record<string, unknown> = {}
        cyclic.self = cyclic
        expect((yield* Effect.flip(source.send([{ id: "c", body: cyclic }])))._tag).toBe("QueueError")
        expect(yield* count(table)).toBe(0)
      }))

    it.effect("fractional milliseconds: visibility and release delays are rounded up to whole milliseconds", () =>
      Effect.gen(function*() {
        const table = fresh("frac")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "337.5 millis" })
        expect(Duration.toMillis(source.visibilityTimeout)).toBe(338)
        yield* source.send([msg("m")])
        yield* source.receive(1)
        yield* TestClock.adjust("337 millis")
        expect(yield* source.receive(1)).toEqual([])
        yield* TestClock.adjust("1 millis")
        const [m] = yield* source.receive(1)
        expect(m).toMatchObject({ id: "m", receiveCount: 2 })
        // a backoff such as 100 * 1.5 ** 3
        expect(yield* source.release(m!, { delay: Duration.millis(337.5), error: "x" })).toBe(true)
        yield* TestClock.adjust("337 millis")
        expect(yield* source.receive(1)).toEqual([])
        yield* TestClock.adjust("1 millis")
        expect((yield* source.receive(1)).map((x) => [x.id, x.lastError])).toEqual([["m", "x"]])
      }))

    it.effect("a message dead-lettered again replaces its entry and moves to the end of the DLQ", () =>
      Effect.gen(function*() {
        const table = fresh("dlqorder")
        const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "1 minute" })
        yield* source.send([msg("a", 1), msg("b", 2), msg("a", 3)])
        const [a1, b, a2] = yield* source.receive(3)
        expect([a1!.id, b!.id, a2!.id]).toEqual(["a", "b", "a"])
        expect(yield* source.deadLetter(a1!, "first")).toBe(true)
        expect(yield* source.deadLetter(b!, "b")).toBe(true)
        expect(yield* source.deadLetter(a2!, "second")).toBe(true)
        const listed = yield* source.deadLetters.list()
        expect(listed.map((d) => [d.id, d.reason, d.body.n])).toEqual([["b", "b", 2], ["a", "second", 3]])
      }))

    it("rejects a visibility timeout under a millisecond when make is called", () => {
      expect(() => PgQueue.make({ table: "t", visibilityTimeout: 0 })).toThrow(/at least 1 millisecond/)
      expect(() => PgQueue.make({ table: "t", visibilityTimeout: "0.5 millis" })).toThrow(/at least 1 millisecond/)
      expect(() => PgQueue.make({ table: "t", visibilityTimeout: -1 })).toThrow(/visibilityTimeout/)
    })

    // live time: the soak waits for real visibility timeouts while PostgreSQL works
    it.effect(
      "soak: 10,000 messages, poison, random failures and crashes — exactly once, nothing lost",
      () =>
        queueLive(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const table = fresh("soak")
          const processed = fresh("processed")
          const effects = fresh("effects")
          yield* ConsumerSql.createProcessedTable(processed)
          yield* sql`CREATE TABLE ${sql(effects)} (id TEXT NOT NULL)`
          const source = yield* PgQueue.make<Body>({ table, visibilityTimeout: "2 seconds", name: "soak-pg" })
          const started = Date.now()
          const result = yield* runSoak<SqlClient.SqlClient>({
            source,
            idempotent: (h) => ConsumerSql.idempotent(h, { table: processed }),
            record: (id) => sql`INSERT INTO ${sql(effects)} (id) VALUES (${id})`,
            effects: Effect.map(
              sql<{ readonly id: string; readonly n: number }>`SELECT id, count(*)::int AS n FROM ${
                sql(effects)
              } GROUP BY id`,
              (rows) => new Map(rows.map((r) => [r.id, r.n]))
            ),
            remaining: count(table),
            transactional: true
          }, {
            n: Number(process.env.SOAK_N ?? 10_000),
            seed: 11,
            prefix: "pg",
            concurrency: 16,
            maxReceiveCount: 5,
            timeout: "10 seconds",
            tick: Effect.sleep("50 millis"),
            maxTicks: 2_400
          })
          console.log("[soak pg]", JSON.stringify({ ...result, seconds: (Date.now() - started) / 1000 }))
        })),
      150_000
    )
  })
})
