/**
 * A {@link QueueSource} in PostgreSQL: a jobs table claimed with `FOR UPDATE SKIP LOCKED`, a visibility
 * timeout, a receive count column, and a dead-letter table `<table>_dlq`.
 *
 * Time: visibility is decided with the caller's `Clock` — `receive` passes its own `now` in milliseconds
 * and the rows store absolute `visible_at` instants — so `TestClock` drives it in tests, and the
 * consumers' clocks must agree (NTP) in production: a consumer whose clock runs ahead by `s` sees claimed
 * messages come back `s` early.
 *
 * This entry point (`effect-resilience/PgQueue`) imports `@effect/sql` (an optional peer dependency); the
 * package root does not.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Duration, Effect } from "effect"
import * as internal from "./internal/queue/pgQueue.js"
import { tableStatements } from "./internal/queue/pgQueueSchema.js"
import type { QueueSource } from "./QueueSource.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface PgOptions {
  /** The jobs table; the dead letters go to `<table>_dlq`. A plain identifier. */
  readonly table: string
  /**
   * How long a received message stays invisible to other receivers. At least 1 millisecond (rounded up
   * to whole milliseconds); anything less throws `IllegalArgumentException` when `make` is called.
   */
  readonly visibilityTimeout: Duration.DurationInput
  /** Names the queue in metrics and errors. Default: the table name. */
  readonly name?: string
  /** Create the tables if they do not exist (`CREATE ... IF NOT EXISTS`). Default: true. */
  readonly migrate?: boolean
}

/**
 * Builds the source (creating its tables unless `migrate: false`). It uses the `SqlClient` it finds
 * here for every operation; inside `sql.withTransaction`, `send` joins the caller's transaction — which
 * makes `Outbox.relay` to a queue in the same database exactly-once.
 *
 * Throws `IllegalArgumentException` for a table that is not a plain identifier or a visibility timeout under
 * 1 millisecond.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Consumer } from "effect-resilience"
 * import * as PgQueue from "effect-resilience/PgQueue"
 *
 * const program = Effect.gen(function*() {
 *   const source = yield* PgQueue.make<{ readonly orderId: string }>({ table: "jobs", visibilityTimeout: "1 minute" })
 *   yield* Consumer.run({ source, handler: (m) => Effect.log(m.body.orderId), maxReceiveCount: 5 })
 *   yield* Effect.never
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <A = unknown>(options: PgOptions) => Effect.Effect<QueueSource<A>, SqlError, SqlClient> =
  internal.make

/**
 * The statements `make` runs when `migrate` is on, for your migration tool.
 *
 * @since 0.1.0
 * @category constructors
 */
export const migrations: (table: string) => ReadonlyArray<string> = tableStatements
