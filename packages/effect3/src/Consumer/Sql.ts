/**
 * Idempotent handlers with SQL, for `Consumer.run`: the message id is recorded in the same transaction as
 * the handler's writes. Works with PostgreSQL and SQLite. This entry point imports `@effect/sql` (an
 * optional peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect, Option } from "effect"
import * as internal from "../internal/queue/consumer/sql.js"
import type { Message } from "../QueueSource.js"

/**
 * Makes a handler idempotent with SQL: in one transaction (`sql.withTransaction`) it inserts the message
 * id into `table` and runs the handler, whose SQL writes join the transaction. A redelivered message finds
 * its id and is skipped (`Option.none()`); a crash between the commit and the acknowledgement cannot
 * apply a message twice; a failure rolls back the id with the writes, so the message can be tried again.
 *
 * Only the handler's writes through the same `SqlClient` are covered: an e-mail sent from the handler
 * is not rolled back. Create the table with {@link createProcessedTable}.
 *
 * Throws `IllegalArgumentException` when `table` is not a plain identifier.
 *
 * @example
 * ```ts
 * import type { SqlClient } from "@effect/sql/SqlClient"
 * import type { SqlError } from "@effect/sql/SqlError"
 * import { Effect } from "effect"
 * import type { QueueSource } from "effect-resilience"
 * import * as ConsumerSql from "effect-resilience/Consumer/Sql"
 *
 * declare const credit: (user: string, amount: number) => Effect.Effect<void, SqlError, SqlClient>
 *
 * const handler = ConsumerSql.idempotent(
 *   (message: QueueSource.Message<{ readonly user: string; readonly amount: number }>) =>
 *     credit(message.body.user, message.body.amount),
 *   { table: "processed_messages" }
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const idempotent: <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options: { readonly table: string }
) => (message: Message<A>) => Effect.Effect<Option.Option<B>, E | SqlError, R | SqlClient> = internal.idempotent

/**
 * Creates the table {@link idempotent} records ids in, if it does not exist:
 * `(message_id TEXT PRIMARY KEY, processed_at BIGINT)`. Delete old rows yourself once no redelivery of
 * them can arrive any more (e.g. `processed_at` older than a week).
 *
 * @since 0.1.0
 * @category constructors
 */
export const createProcessedTable: (table: string) => Effect.Effect<void, SqlError, SqlClient> =
  internal.createProcessedTable
