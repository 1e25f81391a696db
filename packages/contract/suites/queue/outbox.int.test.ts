/**
 * The outbox end to end: the business change and `outbox.append` in one transaction, the relay publishing
 * to a source, a relay crash between publish and mark producing a duplicate, and the idempotent consumer
 * absorbing it. SQLite (in memory, the edition's client) and PostgreSQL, with a memory source and with a `PgQueue`
 * in the same database, where the publish joins the relay's transaction.
 */
import {
  describePg,
  eventually,
  fork,
  interruptedOf,
  provideScope,
  queuePgClient,
  queueSleepLive,
  queueSqlite,
  recordingSleeps,
  SqlClientModule as SqlClient,
  TestClock,
  untilSleeping
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import { Consumer, QueueSource } from "effect-resilience"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import * as Outbox from "effect-resilience/Outbox"
import * as PgQueue from "effect-resilience/PgQueue"
import { pgTables } from "./pgTables.js"

const SqliteMemory = queueSqlite(":memory:")

interface OrderPlaced {
  readonly orderId: string
  readonly total: number
}

/** A source whose `send` publishes and then "crashes" (once), before the relay marks the events sent. */
const crashAfterPublish = <A>(source: QueueSource.QueueSource<A>) => {
  let crashes = 1
  return {
    ...source,
    send: (messages: ReadonlyArray<QueueSource.Outgoing<A>>) =>
      Effect.andThen(source.send(messages), crashes-- > 0 ? Effect.interrupt : Effect.void)
  } satisfies QueueSource.QueueSource<A>
}

const scenario = (outbox: Outbox.Outbox<OrderPlaced>, tables: { orders: string; revenue: string; processed: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* outbox.createTable
    yield* ConsumerSql.createProcessedTable(tables.processed)
    yield* sql`CREATE TABLE ${sql(tables.orders)} (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`
    yield* sql`CREATE TABLE ${sql(tables.revenue)} (order_id TEXT NOT NULL, total INTEGER NOT NULL)`

    const placeOrder = (orderId: string, total: number) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO ${sql(tables.orders)} (id, total) VALUES (${orderId}, ${total})`
        yield* outbox.append({ id: `placed-${orderId}`, key: orderId, body: { orderId, total } })
        if (total < 0) return yield* Effect.fail("negative total")
      }))

    yield* placeOrder("o1", 10)
    yield* placeOrder("o2", 20)
    expect(yield* Effect.flip(placeOrder("o3", -5))).toBe("negative total") // neither the order nor its event
    yield* placeOrder("o4", 40)
    expect(yield* outbox.pending).toBe(3)
    return placeOrder
  })

describe("Outbox (SQLite)", () => {
  it.effect("a relay crash between publish and mark publishes twice; the idempotent consumer applies once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const outbox = Outbox.make<OrderPlaced>({ table: "outbox" })
      const tables = { orders: "orders", revenue: "revenue", processed: "processed" }
      yield* scenario(outbox, tables)
      const source = yield* QueueSource.memory<OrderPlaced>({ visibilityTimeout: "1 minute" })

      // the first pass publishes, then dies before the commit: the events stay pending
      const exit = yield* Effect.exit(outbox.relay(crashAfterPublish(source), { batchSize: 10 }))
      expect(interruptedOf(exit)).toBe(true)
      expect(yield* outbox.pending).toBe(3)
      expect(yield* outbox.relay(source, { batchSize: 2 })).toBe(2)
      expect(yield* outbox.relay(source, { batchSize: 2 })).toBe(1)
      expect(yield* outbox.relay(source)).toBe(0)
      expect(yield* outbox.pending).toBe(0)

      // six messages in the queue for three events, in append order
      const scope = yield* Scope.make()
      const seen: Array<string> = []
      const consumer = yield* Consumer.run({
        source,
        handler: ConsumerSql.idempotent((m: QueueSource.Message<OrderPlaced>) =>
          Effect.andThen(
            Effect.sync(() => seen.push(m.id)),
            sql`INSERT INTO revenue (order_id, total) VALUES (${m.body.orderId}, ${m.body.total})`
          ), { table: "processed" }),
        maxReceiveCount: 3
      }).pipe(provideScope(scope))
      yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 6))
      yield* Scope.close(scope, Exit.void)
      expect(seen).toEqual(["placed-o1", "placed-o2", "placed-o4"])
      const revenue = yield* sql<{ readonly order_id: string; readonly total: number }>`
        SELECT order_id, total FROM revenue ORDER BY order_id`
      expect(revenue).toEqual([{ order_id: "o1", total: 10 }, { order_id: "o2", total: 20 }, {
        order_id: "o4",
        total: 40
      }])
      expect(yield* outbox.purgeSent(0)).toBe(0) // sent "now": not older than 0 ms
    }).pipe(Effect.provide(SqliteMemory)))

  it.effect("append generates an id from Random when none is given; runRelay keeps relaying", () =>
    Effect.gen(function*() {
      const outbox = Outbox.make<number>({ table: "outbox2" })
      yield* outbox.createTable
      const id = yield* outbox.append({ body: 1 })
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      const source = yield* QueueSource.memory<number>({ visibilityTimeout: "1 minute" })
      const relay = yield* fork(outbox.runRelay(source, { interval: "1 second" }))
      yield* eventually(Effect.map(outbox.pending, (n) => n === 0))
      yield* outbox.append({ body: 2 })
      yield* queueSleepLive("10 millis")
      expect(yield* outbox.pending).toBe(1) // the relay sleeps on the (test) clock
      yield* untilSleeping(1000) // (moved before it sleeps, the clock would not wake it)
      yield* TestClock.adjust("1 second")
      yield* eventually(Effect.map(outbox.pending, (n) => n === 0))
      expect((yield* source.receive(10)).map((m) => m.body)).toEqual([1, 2])
      yield* Fiber.interrupt(relay)
    }).pipe(recordingSleeps, Effect.provide(SqliteMemory)))

  it("rejects table names that are not plain identifiers", () => {
    expect(() => Outbox.make({ table: "outbox; DROP TABLE orders" })).toThrow(/identifier/)
  })
})

const pg = pgTables()

describePg("Outbox (PostgreSQL)", () => {
  it.effect("the same scenario on PostgreSQL: the crashed pass publishes again, the consumer applies once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const t = pg.fresh
      const tables = { orders: t("orders"), revenue: t("revenue"), processed: t("processed") }
      const outbox = Outbox.make<OrderPlaced>({ table: t("outbox") })
      yield* scenario(outbox, tables)
      const source = yield* QueueSource.memory<OrderPlaced>({ visibilityTimeout: "1 minute" })
      const exit = yield* Effect.exit(outbox.relay(crashAfterPublish(source)))
      expect(interruptedOf(exit)).toBe(true)
      expect(yield* outbox.pending).toBe(3)
      expect(yield* outbox.relay(source)).toBe(3)
      expect(yield* outbox.pending).toBe(0)
      const scope = yield* Scope.make()
      const consumer = yield* Consumer.run({
        source,
        handler: ConsumerSql.idempotent(
          (m: QueueSource.Message<OrderPlaced>) =>
            sql`INSERT INTO ${sql(tables.revenue)} (order_id, total) VALUES (${m.body.orderId}, ${m.body.total})`,
          { table: tables.processed }
        ),
        maxReceiveCount: 3
      }).pipe(provideScope(scope))
      yield* eventually(Effect.map(consumer.stats, (s) => s.processed === 6))
      yield* Scope.close(scope, Exit.void)
      const revenue = yield* sql<{ readonly order_id: string; readonly total: number }>`
        SELECT order_id, total FROM ${sql(tables.revenue)} ORDER BY order_id`
      expect(revenue).toEqual([{ order_id: "o1", total: 10 }, { order_id: "o2", total: 20 }, {
        order_id: "o4",
        total: 40
      }])
    }).pipe(Effect.provide(queuePgClient)))

  it.effect("relaying to a PgQueue in the same database joins the transaction: a crash publishes nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const t = pg.fresh
      const tables = { orders: t("orders"), revenue: t("revenue"), processed: t("processed") }
      const outbox = Outbox.make<OrderPlaced>({ table: t("outbox") })
      const queue = t("events")
      yield* scenario(outbox, tables)
      const source = yield* PgQueue.make<OrderPlaced>({ table: queue, visibilityTimeout: "1 minute" })
      const exit = yield* Effect.exit(outbox.relay(crashAfterPublish(source)))
      expect(interruptedOf(exit)).toBe(true)
      const rows = (t: string) =>
        Effect.map(sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM ${sql(t)}`, (r) => r[0]!.n)
      expect(yield* rows(queue)).toBe(0) // the publish was rolled back with the mark
      expect(yield* outbox.relay(source)).toBe(3)
      expect(yield* rows(queue)).toBe(3)
      const received = yield* source.receive(10)
      expect(received.map((m) => [m.id, m.key])).toEqual([["placed-o1", "o1"], ["placed-o2", "o2"], [
        "placed-o4",
        "o4"
      ]])
    }).pipe(Effect.provide(queuePgClient)))
})
