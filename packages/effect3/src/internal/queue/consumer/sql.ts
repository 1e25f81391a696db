/** Imported only by the `Consumer/Sql` entry point, so the package root never loads `@effect/sql`. */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, type Option } from "effect"
import type { Message } from "../../../QueueSource.js"
import { identifier } from "../shared.js"

export const idempotent = <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options: { readonly table: string }
) => {
  const table = identifier("Consumer/Sql idempotent table", options.table)
  return (message: Message<A>): Effect.Effect<Option.Option<B>, E | SqlError, R | SqlClient.SqlClient> =>
    runOnce(table, handler, message)
}

export const createProcessedTable = (table: string): Effect.Effect<void, SqlError, SqlClient.SqlClient> => {
  const name = identifier("Consumer/Sql createProcessedTable table", table)
  return Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`CREATE TABLE IF NOT EXISTS ${sql(name)} (
        message_id TEXT PRIMARY KEY,
        processed_at BIGINT NOT NULL
      )`
  )
}

/**
 * Inserts the id first: a concurrent delivery of the same id blocks on the primary key until this
 * transaction ends, then sees the conflict and skips. A failure rolls the insert back with the writes.
 */
export const runOnce = <A, B, E, R>(
  table: string,
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  message: Message<A>
): Effect.Effect<Option.Option<B>, E | SqlError, R | SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql<{ readonly message_id: string }>`INSERT INTO ${sql(table)} (message_id, processed_at)
          VALUES (${message.id}, ${now})
          ON CONFLICT (message_id) DO NOTHING
          RETURNING message_id`.pipe(
          Effect.flatMap((rows) =>
            rows.length === 0 ? Effect.succeedNone : Effect.asSome(handler(message))
          )
        ))
    ))
