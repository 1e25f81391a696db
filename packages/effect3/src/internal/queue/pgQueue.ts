/** Imported only by a backend entry point, so the package root never loads `@effect/sql`. */
import { CHARGED, CLAIMED, claimedState, NOT_HELD } from "@effect-resilience/core/crashAttribution"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Duration, Effect } from "effect"
import type { PgOptions } from "../../PgQueue.js"
import type { Message, QueueError, QueueSource, ReceiveOptions, ReleaseOptions } from "../../QueueSource.js"
import { labels, observeDepth } from "./metrics.js"
import { failWith, pgDeadLetters, pgMoveToDlq, type PgTables } from "./pgDeadLetters.js"
import { tableStatements } from "./pgQueueSchema.js"
import {
  corruptReason,
  deadLetterCorrupt,
  identifier,
  serializedPairs,
  splitReceipt,
  tryParse,
  visibilityMillis,
  withAckMany
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
  readonly suspect: boolean
}

const INSERT_CHUNK = 1000
/** At most this many acks share one statement of `ackMany`. */
const ACK_CHUNK = 256

/** A receipt `ackMany` can bind as `(bigint, int)`; any other goes through `ack`, so that its error is its own. */
const bindable = (seq: string, token: number) =>
  /^(0|[1-9]\d{0,17})$/.test(seq) && Number.isSafeInteger(token) && Math.abs(token) <= 2 ** 31 - 1

/**
 * One `DELETE` for a group of acks, each fenced by its own `seq` and `token`: which of them matched a row. A
 * receipt given twice matches once, as two deletes one after the other would.
 */
const pgAckMany =
  (sql: SqlClient.SqlClient, table: string) =>
  (items: ReadonlyArray<readonly [string, number]>): Effect.Effect<ReadonlyArray<boolean>, SqlError> => {
    const tuples = items.map((_, i) => `($${2 * i + 1}::bigint, $${2 * i + 2}::int)`).join(", ")
    return Effect.map(
      sql.unsafe<{ readonly seq: string; readonly token: number }>(
        `DELETE FROM "${table}" WHERE (seq, token) IN (${tuples}) RETURNING seq::text AS seq, token`,
        items.flat()
      ),
      (rows) => {
        const matched = new Set(rows.map((row) => `${row.seq}:${row.token}`))
        return items.map(([seq, token]) => matched.delete(`${seq}:${token}`))
      }
    )
  }
/**
 * Claiming is one statement: pick the oldest visible rows `FOR UPDATE SKIP LOCKED` (concurrent
 * receivers skip each other's rows instead of waiting), push their `visible_at` past the visibility
 * timeout, count the receive (judging the previous delivery if it was lost: core/crashAttribution.ts) and
 * bump the fencing `token`. Every later statement about a delivery (ack, extend, mark alone, release,
 * dead-letter) is one statement fenced by `seq` and `token`: a receipt whose row was claimed again since
 * matches no row. Times are the caller's `Clock` milliseconds.
 */
export const make = <A>(options: PgOptions): Effect.Effect<QueueSource<A>, SqlError, SqlClient.SqlClient> => {
  const table = identifier("PgQueue table", options.table)
  const visibility = visibilityMillis("PgQueue", options.visibilityTimeout)
  const name = options.name ?? table
  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (options.migrate !== false) {
      for (const statement of tableStatements(table)) yield* sql.unsafe(statement)
    }
    const tables: PgTables = {
      sql,
      name,
      table,
      dlqTable: `${table}_dlq`,
      setDepth: observeDepth(labels(name).base)
    }
    return operations<A>(tables, visibility)
  })
}

const operations = <A>(tables: PgTables, visibility: number): QueueSource<A> => {
  const { name, sql } = tables
  const t = sql(tables.table)
  const fail = failWith(name)
  const moveToDlq = pgMoveToDlq(tables)
  const { receive, send } = sendAndReceive<A>(tables, visibility, moveToDlq)
  /** One statement about one delivery, fenced by its receipt: whether it matched. */
  const fenced = (
    operation: string,
    message: Message<A>,
    statement: (seq: string, token: number) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  ) => {
    const [seq, token] = splitReceipt(message.receipt)
    return statement(seq, token).pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.mapError(fail(operation))
    )
  }

  // one fenced DELETE per ack, in the caller's context: inside the caller's transaction when it has one (a
  // grouped statement sent from another fiber would not be), and interruptible with its caller
  const ack = (message: Message<A>) =>
    fenced("ack", message, (seq, token) => sql`DELETE FROM ${t} WHERE seq = ${seq} AND token = ${token} RETURNING seq`)

  // the consumer's own acks, in groups: one statement (one commit) per group, never inside a transaction of
  // the fiber that sends it (the consumer's handlers ended before their messages are acked)
  const deleteMany = pgAckMany(sql, tables.table)
  const ackMany = (messages: ReadonlyArray<Message<A>>): Effect.Effect<ReadonlyArray<boolean>, QueueError> =>
    Effect.suspend(() => {
      const items: Array<readonly [string, number]> = []
      const odd: Array<number> = []
      messages.forEach((message, i) => {
        const [seq, token] = splitReceipt(message.receipt)
        if (bindable(seq, token)) items.push([seq, token])
        else odd.push(i)
      })
      const chunks: Array<ReadonlyArray<readonly [string, number]>> = []
      for (let i = 0; i < items.length; i += ACK_CHUNK) chunks.push(items.slice(i, i + ACK_CHUNK))
      const grouped = Effect.forEach(chunks, deleteMany).pipe(
        Effect.map((answers) => answers.flat()),
        Effect.mapError(fail("ack")),
        outsideTransaction
      )
      return Effect.flatMap(grouped, (answers) => {
        if (odd.length === 0) return Effect.succeed(answers)
        return Effect.map(Effect.forEach(odd, (i) => outsideTransaction(ack(messages[i]!))), (alone) => {
          const out: Array<boolean> = []
          for (let i = 0, a = 0, g = 0; i < messages.length; i++) out.push(odd[a] === i ? alone[a++]! : answers[g++]!)
          return out
        })
      })
    })

  const extend = (message: Message<A>) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) =>
        fenced("extend", message, (seq, token) =>
          sql`UPDATE ${t} SET visible_at = ${now + visibility} WHERE seq = ${seq} AND token = ${token} RETURNING seq`)
    )

  const release = (message: Message<A>, opts?: ReleaseOptions) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      // whole milliseconds: `visible_at` is a bigint
      const delay = opts?.delay === undefined ? 0 : Math.ceil(Duration.toMillis(opts.delay))
      const undo = opts?.undoReceive === true ? 1 : 0
      // `attribution.release`: unprocessed, the receive is given back and the suspicion kept; else it is cleared
      return fenced("release", message, (seq, token) =>
        sql`UPDATE ${t} SET visible_at = ${now + delay},
            last_error = COALESCE(${opts?.error ?? null}, last_error),
            receive_count = GREATEST(0, receive_count - ${undo}), token = token + 1,
            delivery_state = ${NOT_HELD}, suspect = suspect AND ${undo === 1}
          WHERE seq = ${seq} AND token = ${token} RETURNING seq`)
    })

  // `attribution.runAlone`, and an extension: the handler may start late, once the others have ended
  const markAlone = (message: Message<A>) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) =>
        fenced("markAlone", message, (seq, token) =>
          sql`UPDATE ${t} SET visible_at = ${now + visibility}, delivery_state = ${CHARGED}
            WHERE seq = ${seq} AND token = ${token} RETURNING seq`)
    )

  const deadLetter = (message: Message<A>, reason: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const [seq, token] = splitReceipt(message.receipt)
      return moveToDlq(seq, token, reason, now)
    })

  return withAckMany({
    name,
    visibilityTimeout: Duration.millis(visibility),
    send,
    receive,
    ack,
    extend,
    markAlone,
    release,
    deadLetter,
    deadLetters: pgDeadLetters<A>(tables)
  }, ackMany)
}

/** `send` and `receive`: inserts in chunks; claims in one statement, moving corrupt bodies to the DLQ. */
const sendAndReceive = <A>(
  tables: PgTables,
  visibility: number,
  moveToDlq: ReturnType<typeof pgMoveToDlq>
) => {
  const { name, sql } = tables
  const t = sql(tables.table)
  const fail = failWith(name)
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

  // `attribution.claim` on a row (every SET expression reads the row as it was): a delivery lost while claimed
  // gives its receive back, one lost while running alone keeps it, and either makes the message a suspect
  const claimedCount = sql.literal(
    `CASE WHEN j.delivery_state = ${CLAIMED} THEN GREATEST(j.receive_count - 1, 0) ELSE j.receive_count END + 1`
  )
  const claimedSuspect = sql.literal(`j.suspect OR j.delivery_state <> ${NOT_HELD}`)
  const receive = (max: number, options?: ReceiveOptions) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      sql<JobRow>`WITH claimed AS (
          SELECT seq FROM ${t} WHERE visible_at <= ${now}
          ORDER BY visible_at, seq LIMIT ${max}
          FOR UPDATE SKIP LOCKED
        )
        UPDATE ${t} AS j SET visible_at = ${now + visibility},
          receive_count = ${claimedCount}, suspect = ${claimedSuspect},
          delivery_state = ${claimedState(options?.runsSuspectsAlone === true)},
          token = j.token + 1, last_received_at = ${now}
        FROM claimed WHERE j.seq = claimed.seq
        RETURNING j.seq::text AS seq, j.id, j.key, j.body, j.enqueued_at::float8 AS enqueued_at,
          j.receive_count, j.token, j.last_error, j.suspect`.pipe(
        Effect.mapError(fail("receive")),
        Effect.flatMap((rows) => {
          const out: Array<Message<A>> = []
          const corrupt: Array<readonly [JobRow, string]> = []
          for (const row of rows) {
            const body = tryParse(row.body)
            if (body.ok) out.push(toMessage<A>(row, body.value, now))
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
              labels(name).corrupt
            ),
            out
          )
        })
      ))

  return { send, receive }
}

/** Runs `effect` on a connection of the pool, even where the fiber is inside a transaction. */
const outsideTransaction = <X, E, R>(effect: Effect.Effect<X, E, R>): Effect.Effect<X, E, R> =>
  Effect.mapInputContext(
    effect,
    (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>
  )

const toMessage = <A>(row: JobRow, body: unknown, now: number): Message<A> => ({
  id: row.id,
  key: row.key ?? undefined,
  body: body as A,
  receiveCount: row.receive_count,
  suspect: row.suspect,
  enqueuedAt: row.enqueued_at,
  receivedAt: now,
  lastError: row.last_error ?? undefined,
  receipt: `${row.seq}:${row.token}`
})
