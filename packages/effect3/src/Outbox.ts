/**
 * The transactional outbox: save a business change and the event announcing it in one SQL transaction,
 * and let a relay publish the event later. Publishing straight after the commit loses the event when the
 * process dies between the two; the outbox cannot lose it — but the relay may publish it twice (it crashed
 * after publishing, before marking the event sent), so consumers must be idempotent (`idempotent` of
 * `effect-resilience/Consumer/Sql`).
 *
 * Works with PostgreSQL and SQLite through `@effect/sql`. This entry point (`effect-resilience/Outbox`) imports
 * `@effect/sql` (an optional peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Duration, Effect } from "effect"
import * as internal from "./internal/queue/outbox.js"
import type { QueueError, QueueSource } from "./QueueSource.js"

/**
 * An event to publish.
 *
 * @since 0.1.0
 * @category models
 */
export interface Event<A = unknown> {
  /** The message id consumers deduplicate on. Default: a random UUID (from `Random`). */
  readonly id?: string
  /** The aggregate key (e.g. the order id). Events are published in the order they were appended. */
  readonly key?: string
  readonly body: A
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RelayOptions {
  /** Events per pass (one transaction). Default: 100. */
  readonly batchSize?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Outbox<A = unknown> {
  readonly table: string
  /** `CREATE TABLE IF NOT EXISTS` for the outbox table and its index of pending events. */
  readonly createTable: Effect.Effect<void, SqlError, SqlClient>
  /**
   * Writes the event. Run it inside the `sql.withTransaction` of the business change, so both commit or
   * neither does. Returns the event's id.
   */
  readonly append: (event: Event<A>) => Effect.Effect<string, SqlError, SqlClient>
  /**
   * One relay pass: publishes the oldest pending events (up to `batchSize`) to `source`, in the order
   * they were appended, and marks them sent — in one transaction. Returns how many were published.
   *
   * At-least-once: a failure or crash after the publish leaves the events pending, so the next pass
   * publishes them again. With a `PgQueue` in the same database the publish joins the transaction,
   * which makes the relay exactly-once. On PostgreSQL the pending rows are locked, so concurrent relays
   * take turns (and keep the order per key).
   */
  readonly relay: (
    source: QueueSource<A>,
    options?: RelayOptions
  ) => Effect.Effect<number, SqlError | QueueError, SqlClient>
  /**
   * Relays forever: a pass, then the next one at once while events keep coming, or after `interval`
   * when the outbox was drained. Failures are logged and the relay carries on after `interval`.
   */
  readonly runRelay: (
    source: QueueSource<A>,
    options: RelayOptions & { readonly interval: Duration.DurationInput }
  ) => Effect.Effect<never, never, SqlClient>
  /** How many events wait to be published. */
  readonly pending: Effect.Effect<number, SqlError, SqlClient>
  /** Deletes events that were sent longer ago than `olderThan`. Returns how many. */
  readonly purgeSent: (olderThan: Duration.DurationInput) => Effect.Effect<number, SqlError, SqlClient>
}

/**
 * An outbox in `table` (a plain identifier).
 *
 * @example
 * ```ts
 * import { SqlClient } from "@effect/sql"
 * import { Effect } from "effect"
 * import type { QueueSource } from "effect-resilience"
 * import * as Outbox from "effect-resilience/Outbox"
 *
 * interface OrderPlaced {
 *   readonly orderId: string
 *   readonly total: number
 * }
 * const outbox = Outbox.make<OrderPlaced>({ table: "outbox" })
 *
 * const placeOrder = (orderId: string, total: number) =>
 *   Effect.gen(function*() {
 *     const sql = yield* SqlClient.SqlClient
 *     yield* sql.withTransaction(Effect.gen(function*() {
 *       yield* sql`INSERT INTO orders (id, total) VALUES (${orderId}, ${total})`
 *       yield* outbox.append({ id: `order-placed-${orderId}`, key: orderId, body: { orderId, total } })
 *     }))
 *   })
 *
 * declare const source: QueueSource.QueueSource<OrderPlaced>
 * const relay = outbox.runRelay(source, { interval: "1 second" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <A = unknown>(options: { readonly table: string }) => Outbox<A> = internal.make
