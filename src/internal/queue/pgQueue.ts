/** Imported only by a backend entry point, so the package root never loads `@effect/sql`. */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Duration, Effect, Option } from "effect"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import type { PgOptions } from "../../PgQueue.js"
import type { Message, QueueSource, ReleaseOptions } from "../../QueueSource.js"
import { labels, observeDepth } from "./metrics.js"
import { tableStatements } from "./pgQueueSchema.js"
import { QueueError } from "./queueSource.js"
import {
  corruptReason,
  deadLetterCorrupt,
  identifier,
  listLimit,
  serializedPairs,
  splitReceipt,
  tryParse,
  visibilityMillis
} from "./shared.js"

interface JobRow {
  readonly seq: string
  readonly id: string
  readonly key: string | null
  readonly body: string
  readonly enqueued_at: number
  readonly receive_count: number
  readonly token: number
  readonly last_error: string | null
}

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

const INSERT_CHUNK = 1000

/**
 * Claiming is one statement: pick the oldest visible rows `FOR UPDATE SKIP LOCKED` (concurrent
 * receivers skip each other's rows instead of waiting), push their `visible_at` past the visibility
 * timeout, count the receive and bump the fencing `token`. Times are the caller's `Clock` milliseconds.
 */
export const make = <A>(options: PgOptions): Effect.Effect<QueueSource<A>, SqlError, SqlClient.SqlClient> => {
  const table = identifier("PgQueue table", options.table)
  const visibility = visibilityMillis("PgQueue", options.visibilityTimeout)
  const name = options.name ?? table
  const dlqTable = `${table}_dlq`
  const tags = labels(name)
  const setDepth = observeDepth(tags.base)

  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (options.migrate !== false) {
      for (const statement of tableStatements(table)) yield* sql.unsafe(statement)
    }
    const t = sql(table)
    const d = sql(dlqTable)
    const fail = (operation: string) => (cause: unknown) => new QueueError({ queue: name, operation, cause })

    const toMessage = (row: JobRow, body: unknown, now: number): Message<A> => ({
      id: row.id,
      key: row.key ?? undefined,
      body: body as A,
      receiveCount: row.receive_count,
      enqueuedAt: row.enqueued_at,
      receivedAt: now,
      lastError: row.last_error ?? undefined,
      receipt: `${row.seq}:${row.token}`
    })

    const toDeadLetter = (row: DeadRow): DeadLetter<A> => {
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

    const depth = sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM ${d}`.pipe(
      Effect.flatMap((rows) => setDepth(rows[0]?.n ?? 0)),
      Effect.mapError(fail("depth"))
    )

    const deadColumns = sql.literal(
      `id, key, body, reason, receive_count, first_seen_at::float8 AS first_seen_at,
       last_seen_at::float8 AS last_seen_at, dead_lettered_at::float8 AS dead_lettered_at`
    )

    const deadLetters: DeadLetterQueue<A> = {
      list: (opts) =>
        Effect.suspend(() => sql<DeadRow>`SELECT ${deadColumns} FROM ${d} ORDER BY dlq_seq LIMIT ${listLimit(opts)}`)
          .pipe(Effect.map((rows) => rows.map(toDeadLetter)), Effect.mapError(fail("list"))),
      inspect: (id) =>
        sql<DeadRow>`SELECT ${deadColumns} FROM ${d} WHERE id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toDeadLetter)),
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

    const send = (messages: ReadonlyArray<{ readonly id: string; readonly key?: string; readonly body: A }>) =>
      Effect.flatMap(
        serializedPairs(messages, fail("send")),
        (pairs) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const rows = pairs.map(([m, body]) => ({
              id: m.id,
              key: m.key ?? null,
              body,
              enqueued_at: now,
              visible_at: now
            }))
            const chunks: Array<typeof rows> = []
            for (let i = 0; i < rows.length; i += INSERT_CHUNK) chunks.push(rows.slice(i, i + INSERT_CHUNK))
            return Effect.forEach(chunks, (chunk) => sql`INSERT INTO ${t} ${sql.insert(chunk)}`, { discard: true })
              .pipe(Effect.mapError(fail("send")))
          })
      )

    const receive = (max: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql<JobRow>`WITH claimed AS (
            SELECT seq FROM ${t} WHERE visible_at <= ${now}
            ORDER BY visible_at, seq LIMIT ${max}
            FOR UPDATE SKIP LOCKED
          )
          UPDATE ${t} AS j SET visible_at = ${now + visibility}, receive_count = j.receive_count + 1,
            token = j.token + 1, last_received_at = ${now}
          FROM claimed WHERE j.seq = claimed.seq
          RETURNING j.seq::text AS seq, j.id, j.key, j.body, j.enqueued_at::float8 AS enqueued_at,
            j.receive_count, j.token, j.last_error`.pipe(
          Effect.mapError(fail("receive")),
          Effect.flatMap((rows) => {
            const out: Array<Message<A>> = []
            const corrupt: Array<readonly [JobRow, string]> = []
            for (const row of rows) {
              const body = tryParse(row.body)
              if (body.ok) out.push(toMessage(row, body.value, now))
              else corrupt.push([row, corruptReason(body.error)])
            }
            out.sort((a, b) => Number(splitReceipt(a.receipt)[0]) - Number(splitReceipt(b.receipt)[0]))
            if (corrupt.length === 0) return Effect.succeed(out)
            // a body that can never be read goes straight to the DLQ (raw text kept); if that fails it
            // comes back after the visibility timeout and is tried again, and the readable rows still run
            return Effect.as(
              deadLetterCorrupt(
                name,
                corrupt,
                ([row]) => row.id,
                ([row, reason]) => moveToDlq(row.seq, row.token, reason, now),
                tags.corrupt
              ),
              out
            )
          })
        ))

    const ack = (message: Message<A>) =>
      sql<{ readonly seq: string }>`DELETE FROM ${t} WHERE seq = ${splitReceipt(message.receipt)[0]} RETURNING seq`
        .pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(fail("ack"))
        )

    const release = (message: Message<A>, opts?: ReleaseOptions) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const [seq, token] = splitReceipt(message.receipt)
        // whole milliseconds: `visible_at` is a bigint
        const delay = opts?.delay === undefined ? 0 : Math.ceil(Duration.toMillis(opts.delay))
        const undo = opts?.undoReceive === true ? 1 : 0
        return sql<{ readonly seq: string }>`UPDATE ${t} SET visible_at = ${now + delay},
            last_error = COALESCE(${opts?.error ?? null}, last_error),
            receive_count = GREATEST(0, receive_count - ${undo}), token = token + 1
          WHERE seq = ${seq} AND token = ${token} RETURNING seq`
      }).pipe(Effect.map((rows) => rows.length > 0), Effect.mapError(fail("release")))

    /** Moves a claimed row (fenced by its token) to the DLQ; a replaced entry moves to the end. */
    const moveToDlq = (seq: string, token: number, reason: string, now: number) =>
      sql<{ readonly id: string }>`WITH moved AS (
            DELETE FROM ${t} WHERE seq = ${seq} AND token = ${token}
            RETURNING id, key, body, receive_count, enqueued_at, last_received_at
          )
          INSERT INTO ${d} AS dl (id, key, body, reason, receive_count, first_seen_at, last_seen_at, dead_lettered_at)
          SELECT id, key, body, ${reason}, receive_count, enqueued_at, COALESCE(last_received_at, ${now}), ${now}
          FROM moved
          ON CONFLICT (id) DO UPDATE SET key = excluded.key, body = excluded.body, reason = excluded.reason,
            receive_count = excluded.receive_count, first_seen_at = LEAST(dl.first_seen_at, excluded.first_seen_at),
            last_seen_at = excluded.last_seen_at, dead_lettered_at = excluded.dead_lettered_at,
            dlq_seq = DEFAULT
          RETURNING id`.pipe(
        Effect.mapError(fail("deadLetter")),
        Effect.flatMap((rows) => rows.length > 0 ? Effect.as(depth, true) : Effect.succeed(false))
      )

    const deadLetter = (message: Message<A>, reason: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const [seq, token] = splitReceipt(message.receipt)
        return moveToDlq(seq, token, reason, now)
      })

    const visibilityTimeout = Duration.millis(visibility)
    const source: QueueSource<A> = { name, visibilityTimeout, send, receive, ack, release, deadLetter, deadLetters }
    return source
  })
}
