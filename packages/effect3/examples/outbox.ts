/**
 * The outbox, end to end (`npm run outbox`):
 *
 * 1. each order and its `OrderPlaced` event are written in one SQLite transaction (`outbox.append`);
 * 2. the relay publishes pending events to a queue — and "crashes" once after publishing, before marking
 *    them sent, so the next pass publishes them again: the queue now holds duplicates;
 * 3. an idempotent consumer (`ConsumerSql.idempotent`) records each message id in the same transaction as
 *    its write, so every order is counted exactly once.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Exit } from "effect"
import { Consumer, QueueSource } from "effect-resilience"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import * as Outbox from "effect-resilience/Outbox"

interface OrderPlaced {
  readonly orderId: string
  readonly total: number
}

const outbox = Outbox.make<OrderPlaced>({ table: "outbox" })

const placeOrder = (orderId: string, total: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`INSERT INTO orders (id, total) VALUES (${orderId}, ${total})`
      yield* outbox.append({ id: `order-placed-${orderId}`, key: orderId, body: { orderId, total } })
    }))
  })

/** A queue whose first publish "crashes" the relay after the messages went out. */
const crashingOnce = (source: QueueSource.QueueSource<OrderPlaced>): QueueSource.QueueSource<OrderPlaced> => {
  let crashed = false
  return {
    ...source,
    send: (messages) =>
      Effect.zipRight(
        source.send(messages),
        Effect.suspend(() => {
          if (crashed) return Effect.void
          crashed = true
          return Effect.dieMessage("relay crashed after publishing, before marking the events sent")
        })
      )
  }
}

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`
  yield* sql`CREATE TABLE revenue (order_id TEXT PRIMARY KEY, total INTEGER NOT NULL)`
  yield* outbox.createTable
  yield* ConsumerSql.createProcessedTable("processed_messages")

  for (const [id, total] of [["o-1", 120], ["o-2", 80], ["o-3", 45]] as const) yield* placeOrder(id, total)
  console.log(`placed 3 orders; ${yield* outbox.pending} events pending in the outbox`)

  const queue = yield* QueueSource.memory<OrderPlaced>({ visibilityTimeout: "30 seconds", name: "orders" })
  const first = yield* Effect.exit(outbox.relay(crashingOnce(queue)))
  console.log(`relay pass 1: ${Exit.isFailure(first) ? "crashed after publishing" : "ok"}`)
  console.log(`relay pass 2: published ${yield* outbox.relay(queue)} events`)
  console.log(`events pending now: ${yield* outbox.pending}`)

  let applied = 0
  let skipped = 0
  const handler = ConsumerSql.idempotent(
    (message: QueueSource.Message<OrderPlaced>) =>
      sql`INSERT INTO revenue (order_id, total) VALUES (${message.body.orderId}, ${message.body.total})`,
    { table: "processed_messages" }
  )
  const consumer = yield* Consumer.run({
    source: queue,
    handler: (message) =>
      Effect.tap(handler(message), (result) => Effect.sync(() => result._tag === "Some" ? applied++ : skipped++)),
    maxReceiveCount: 5,
    concurrency: 2
  })
  while ((yield* consumer.stats).processed < 6) yield* Effect.sleep("10 millis")

  const [row] = yield* sql<{ readonly orders: number; readonly total: number }>`
    SELECT count(*) AS orders, sum(total) AS total FROM revenue`
  console.log(`consumer: ${applied} applied, ${skipped} duplicates skipped`)
  console.log(`revenue: ${row?.orders} orders, total ${row?.total} (expected 3 orders, total 245)`)
  if (row?.orders !== 3 || row.total !== 245) return yield* Effect.dieMessage("an order was counted twice")
}).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename: ":memory:" })))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exit(1)
})
