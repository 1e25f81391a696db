/** Imported only by a backend entry point, so the package root never loads `@effect/sql`. */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Duration, Effect, Schedule } from "effect"
import type { Event, Outbox, RelayOptions } from "../../Outbox.js"
import type { Outgoing, QueueError, QueueSource } from "../../QueueSource.js"
import * as validate from "../validate.js"
import { identifier, randomId } from "./shared.js"

interface Row {
  readonly seq: string | number
  readonly id: string
  readonly key: string | null
  readonly body: string
}

export const createTable = (table: string): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const seq = sql.onDialectOrElse({
      pg: () => "seq BIGSERIAL PRIMARY KEY",
      orElse: () => "seq INTEGER PRIMARY KEY AUTOINCREMENT"
    })
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${table}" (
      ${seq},
      id TEXT NOT NULL UNIQUE,
      key TEXT,
      body TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      sent_at BIGINT
    )`)
    yield* sql.unsafe(`CREATE INDEX IF NOT EXISTS "${table}_pending" ON "${table}" (seq) WHERE sent_at IS NULL`)
  })

export const append = <A>(
  table: string,
  id: string,
  event: Event<A>
): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    yield* sql`INSERT INTO ${sql(table)} (id, key, body, created_at)
      VALUES (${id}, ${event.key ?? null}, ${JSON.stringify(event.body)}, ${now})`
  })

/**
 * One pass, in one transaction: read the oldest pending events (locked `FOR UPDATE` on PostgreSQL, so
 * concurrent relays take turns instead of publishing the same rows), publish them, mark them sent. A
 * crash after the publish and before the commit leaves them pending: they are published again.
 */
export const relay = <A>(
  table: string,
  source: QueueSource<A>,
  batchSize: number
): Effect.Effect<number, SqlError | QueueError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const lock = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
    return yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql<Row>`SELECT seq, id, key, body FROM ${sql(table)}
        WHERE sent_at IS NULL ORDER BY seq LIMIT ${batchSize} ${lock}`
      if (rows.length === 0) return 0
      yield* source.send(rows.map((row): Outgoing<A> => {
        const body = JSON.parse(row.body) as A
        return row.key === null ? { id: row.id, body } : { id: row.id, key: row.key, body }
      }))
      const now = yield* Clock.currentTimeMillis
      yield* sql`UPDATE ${sql(table)} SET sent_at = ${now} WHERE seq IN ${sql.in(rows.map((row) => row.seq))}`
      return rows.length
    }))
  })

export const pending = (table: string): Effect.Effect<number, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.map(
        sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM ${sql(table)} WHERE sent_at IS NULL`,
        (rows) => Number(rows[0]?.n ?? 0)
      )
  )

export const purgeSent = (table: string, olderThan: number): Effect.Effect<number, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const rows = yield* sql<{ readonly id: string }>`DELETE FROM ${sql(table)}
      WHERE sent_at IS NOT NULL AND sent_at < ${now - olderThan} RETURNING id`
    return rows.length
  })

export const make = <A = unknown>(options: { readonly table: string }): Outbox<A> => {
  const table = identifier("Outbox table", options.table)
  const relayPass = (source: QueueSource<A>, opts?: RelayOptions) => {
    const batchSize = opts?.batchSize === undefined ? 100 : validate.positiveInt("Outbox batchSize", opts.batchSize)
    return relay(table, source, batchSize)
  }
  return {
    table,
    createTable: createTable(table),
    append: (event) =>
      Effect.flatMap(
        event.id === undefined ? randomId : Effect.succeed(event.id),
        (id) => Effect.as(append(table, id, event), id)
      ),
    relay: relayPass,
    runRelay: (source, opts) => {
      const interval = Duration.millis(validate.millis("Outbox interval", opts.interval, { finite: true }))
      const batchSize = opts.batchSize ?? 100
      const pass = relayPass(source, { batchSize }).pipe(
        Effect.flatMap((n) => n < batchSize ? Effect.sleep(interval) : Effect.void),
        Effect.catchAllCause((cause) =>
          Effect.zipRight(Effect.logWarning(`outbox ${table}: relay failed`, cause), Effect.sleep(interval))
        )
      )
      return Effect.repeat(pass, Schedule.forever).pipe(Effect.zipRight(Effect.never))
    },
    pending: pending(table),
    purgeSent: (olderThan) => purgeSent(table, validate.millis("Outbox purgeSent olderThan", olderThan))
  }
}
