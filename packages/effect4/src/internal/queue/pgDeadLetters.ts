/** Imported only by a backend entry point, so the package root never loads `effect/sql`. */
import { Clock, Effect, Metric, Option } from "effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import { labels } from "./metrics.js"
import { QueueError } from "./queueSource.js"
import { listLimit, tryParse } from "./shared.js"

interface DeadRow {
  readonly id: string
  readonly key: string | null
  readonly body: string
  readonly reason: string
  readonly receive_count: number
  readonly first_seen_at: number
  readonly last_seen_at: number
  readonly dead_lettered_at: number
}

export interface PgTables {
  readonly sql: SqlClient.SqlClient
  /** The queue's name, for errors. */
  readonly name: string
  readonly table: string
  readonly dlqTable: string
  readonly setDepth: (depth: number) => Effect.Effect<number>
}

export const failWith = (name: string) => (operation: string) => (cause: unknown) =>
  new QueueError({ queue: name, operation, cause })

const toDeadLetter = <A>(row: DeadRow): DeadLetter<A> => {
  // a body that is not JSON (dead-lettered as corrupt on receive) is listed as its raw text
  const parsed = tryParse(row.body)
  return {
    id: row.id,
    key: row.key ?? undefined,
    body: (parsed.ok ? parsed.value : row.body) as A,
    reason: row.reason,
    receiveCount: row.receive_count,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
    deadLetteredAt: row.dead_lettered_at
  }
}

/** The depth of the dead-letter table, which also sets the gauge. */
export const pgDepth = ({ dlqTable, name, setDepth, sql }: PgTables): Effect.Effect<number, QueueError> =>
  sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM ${sql(dlqTable)}`.pipe(
    Effect.flatMap((rows) => setDepth(rows[0]?.n ?? 0)),
    Effect.mapError(failWith(name)("depth"))
  )

/**
 * Moves a claimed row (fenced by its token) to the DLQ in one statement; an entry the message had there is
 * replaced and moves to the end. `false` when the receipt is stale.
 */
export const pgMoveToDlq = (tables: PgTables) => {
  const { dlqTable, name, sql, table } = tables
  const depth = pgDepth(tables)
  return (seq: string, token: number, reason: string, now: number): Effect.Effect<boolean, QueueError> =>
    sql<{ readonly id: string }>`WITH moved AS (
          DELETE FROM ${sql(table)} WHERE seq = ${seq} AND token = ${token}
          RETURNING id, key, body, receive_count, enqueued_at, last_received_at
        )
        INSERT INTO ${sql(dlqTable)} AS dl
          (id, key, body, reason, receive_count, first_seen_at, last_seen_at, dead_lettered_at)
        SELECT id, key, body, ${reason}, receive_count, enqueued_at, COALESCE(last_received_at, ${now}), ${now}
        FROM moved
        ON CONFLICT (id) DO UPDATE SET key = excluded.key, body = excluded.body, reason = excluded.reason,
          receive_count = excluded.receive_count, first_seen_at = LEAST(dl.first_seen_at, excluded.first_seen_at),
          last_seen_at = excluded.last_seen_at, dead_lettered_at = excluded.dead_lettered_at,
          dlq_seq = DEFAULT
        RETURNING id`.pipe(
      Effect.mapError(failWith(name)("deadLetter")),
      Effect.flatMap((rows) => rows.length > 0 ? Effect.as(depth, true) : Effect.succeed(false))
    )
}

export const pgDeadLetters = <A>(tables: PgTables): DeadLetterQueue<A> => {
  const { dlqTable, name, sql, table } = tables
  const t = sql(table)
  const d = sql(dlqTable)
  const fail = failWith(name)
  const depth = pgDepth(tables)
  const deadColumns = sql.literal(
    `id, key, body, reason, receive_count, first_seen_at::float8 AS first_seen_at,
     last_seen_at::float8 AS last_seen_at, dead_lettered_at::float8 AS dead_lettered_at`
  )
  return {
    list: (opts) =>
      Effect.suspend(() => sql<DeadRow>`SELECT ${deadColumns} FROM ${d} ORDER BY dlq_seq LIMIT ${listLimit(opts)}`)
        .pipe(Effect.map((rows) => rows.map(toDeadLetter<A>)), Effect.mapError(fail("list"))),
    inspect: (id) =>
      sql<DeadRow>`SELECT ${deadColumns} FROM ${d} WHERE id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toDeadLetter<A>)),
        Effect.mapError(fail("inspect"))
      ),
    redrive: (ids) =>
      ids !== undefined && ids.length === 0 ?
        Effect.succeed(0) :
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sql<{ readonly seq: string }>`WITH moved AS (
            DELETE FROM ${d} ${ids === undefined ? sql`` : sql`WHERE id IN ${sql.in(ids)}`}
            RETURNING id, key, body, dlq_seq
          )
          INSERT INTO ${t} (id, key, body, enqueued_at, visible_at)
          SELECT id, key, body, ${now}, ${now} FROM moved ORDER BY dlq_seq
          RETURNING seq`.pipe(
            Effect.mapError(fail("redrive")),
            Effect.tap((rows) => Metric.update(labels(name).redriven, rows.length)),
            Effect.tap(() => depth),
            Effect.map((rows) => rows.length)
          )),
    purge: (ids) =>
      ids !== undefined && ids.length === 0 ? Effect.succeed(0) : sql<{ readonly id: string }>`DELETE FROM ${d}
          ${ids === undefined ? sql`` : sql`WHERE id IN ${sql.in(ids)}`} RETURNING id`.pipe(
        Effect.mapError(fail("purge")),
        Effect.tap(() => depth),
        Effect.map((rows) => rows.length)
      ),
    depth
  }
}
