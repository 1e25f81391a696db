/** Loaded on first use (`import()`), so `effect-resilience` itself never loads `@effect/sql`. */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Option } from "effect"
import type { Message } from "../../queue/QueueSource.js"

export const createProcessedTable = (table: string): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (
        message_id TEXT PRIMARY KEY,
        processed_at BIGINT NOT NULL
      )`
  )

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
