import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import type { ClaimRef } from "../../IdempotencyStore.js"
import type { ResolvedSqlOptions, SqlDialect } from "./sqlOptions.js"

/*
 * The SQL store's statements (see `sql.ts`), each compiled once when the store is made.
 */

/** `state` values: a claim whose handler is still running, and a stored response. */
export const IN_PROGRESS = 0
export const COMPLETED = 1

export interface ExistingRow {
  readonly token: string
  readonly fingerprint: string
  readonly state: unknown
  readonly status: unknown
  readonly headers: string | null
  readonly body: Uint8Array | null
  readonly lease_until: unknown
  readonly expires_at: unknown
}

/** Stands for a statement's parameter while {@link prepare} compiles it. */
class Slot {
  constructor(readonly index: number) {}
}

/**
 * A statement compiled once, when the store is made: `build` (whose template may use only its `count` parameters,
 * each any number of times, and constants) is compiled with a {@link Slot} for each parameter, and every call
 * sends the same text with the values in the slots' places, as `sql.unsafe`. The text and the values are
 * those the template would give; building and compiling the template again for every statement cost its
 * segments, the compiled string, and their garbage.
 */
const compileWith = <Row extends object>(
  sql: SqlClient.SqlClient,
  count: number,
  build: (slots: ReadonlyArray<unknown>) => Statement.Statement<Row>
): (params: ReadonlyArray<unknown>) => Statement.Statement<Row> => {
  const slots = Array.from({ length: count }, (_, i) => new Slot(i))
  const [text, binds] = build(slots).compile()
  const at = binds.map((bind) => bind instanceof Slot ? bind.index : -1)
  if (slots.some((slot) => !binds.includes(slot))) throw new Error(`a parameter is missing from: ${text}`)
  return (params) => sql.unsafe<Row>(text, at.map((i, j) => i < 0 ? binds[j] : params[i]))
}

/** {@link compileWith} for a statement of fixed parameters, called with them. */
const prepare = <Row extends object, P extends ReadonlyArray<unknown>>(
  sql: SqlClient.SqlClient,
  build: (...params: P) => Statement.Statement<Row>
): (...params: P) => Statement.Statement<Row> => {
  const compiled = compileWith(sql, build.length, (slots) => build(...(slots as unknown as P)))
  return (...params) => compiled(params)
}

/** A row a batched statement wrote: the claim or the completion it belongs to. */
export interface WrittenRow {
  readonly scope: string
  readonly key: string
  readonly token: string
}

/** The parameters of one claim in a batched upsert, and of one completion in a batched update. */
const CLAIM_PARAMS = 6
const COMPLETION_PARAMS = 8

/**
 * A statement for batches of `1..maxWidth` operations: the text for `n` rows is compiled when a batch of `n`
 * first goes out, and kept.
 */
const batched = <Row extends object>(
  sql: SqlClient.SqlClient,
  perRow: number,
  extra: number,
  build: (n: number, slots: ReadonlyArray<unknown>) => Statement.Statement<Row>
) => {
  const bySize = new Map<number, (params: ReadonlyArray<unknown>) => Statement.Statement<Row>>()
  return (n: number, params: ReadonlyArray<unknown>): Statement.Statement<Row> => {
    let compiled = bySize.get(n)
    if (compiled === undefined) {
      bySize.set(n, compiled = compileWith(sql, extra + n * perRow, (slots) => build(n, slots)))
    }
    return compiled(params)
  }
}

/**
 * The claim's upsert takes a row over when `core.decideClaim` says "New" (expired) or "Reclaim" (same request,
 * lease run out), in SQL: the single and the batched upsert alike.
 */
const takeover = (sql: SqlClient.SqlClient, table: Statement.Identifier, now: unknown) =>
  sql`ON CONFLICT (scope, key) DO UPDATE SET
        fingerprint = excluded.fingerprint, token = excluded.token, state = excluded.state, status = NULL,
        headers = NULL, body = NULL, lease_until = excluded.lease_until, expires_at = excluded.expires_at
      WHERE ${table}.expires_at <= ${now}
        OR (${table}.state = ${IN_PROGRESS} AND ${table}.lease_until <= ${now}
          AND ${table}.fingerprint = excluded.fingerprint)`

/** The statements of one store, over its table (`table` is the identifier, `tableName` its name). */
export const queries = (
  sql: SqlClient.SqlClient,
  dialect: SqlDialect,
  { cleanupBatch, table: tableName }: ResolvedSqlOptions
) => {
  const table = sql(tableName)

  const upsert = prepare(sql, (
    scope: string,
    key: string,
    fingerprint: string,
    token: string,
    leaseUntil: number,
    expiresAt: number,
    now: number
  ) =>
    sql<{ readonly token: string }>`
      INSERT INTO ${table} (scope, key, fingerprint, token, state, status, headers, body, lease_until, expires_at)
      VALUES (${scope}, ${key}, ${fingerprint}, ${token}, ${IN_PROGRESS}, NULL, NULL, NULL,
        ${leaseUntil}, ${expiresAt})
      ${takeover(sql, table, now)}
      RETURNING token`)

  const existing = prepare(sql, (scope: string, key: string, fingerprint: string) =>
    sql<ExistingRow>`
      SELECT token, fingerprint, state, status, headers, lease_until, expires_at,
        CASE WHEN state = ${COMPLETED} AND fingerprint = ${fingerprint} THEN body END AS body
      FROM ${table}
      WHERE scope = ${scope} AND key = ${key}`)

  const owner = (scope: string, key: string, token: string, now: number) =>
    sql`scope = ${scope} AND key = ${key} AND token = ${token} AND state = ${IN_PROGRESS}
      AND expires_at > ${now}`

  const completion = prepare(sql, (
    status: number,
    headers: string,
    body: Uint8Array,
    expiresAt: number,
    scope: string,
    key: string,
    token: string,
    now: number
  ) =>
    sql<{ readonly token: string }>`
      UPDATE ${table} SET state = ${COMPLETED}, status = ${status}, headers = ${headers}, body = ${body},
        lease_until = 0, expires_at = ${expiresAt}
      WHERE ${owner(scope, key, token, now)}
      RETURNING token`)

  const renewal = prepare(
    sql,
    (leaseUntil: number, scope: string, key: string, token: string, now: number) =>
      sql<{ readonly token: string }>`
      UPDATE ${table} SET lease_until = ${leaseUntil}
      WHERE ${owner(scope, key, token, now)}
      RETURNING token`
  )

  const removal = prepare(
    sql,
    (scope: string, key: string, token: string, now: number) =>
      sql`DELETE FROM ${table} WHERE ${owner(scope, key, token, now)}`
  )

  /** After a failed attempt: the owner's own completion, committed by an attempt whose answer was lost. */
  const completedBy = (ref: ClaimRef) =>
    Effect.map(
      sql`SELECT 1 AS done FROM ${table}
        WHERE scope = ${ref.scope} AND key = ${ref.key} AND token = ${ref.token} AND state = ${COMPLETED}`,
      (rows) => rows.length > 0
    )

  const deleteBatch = (now: number) =>
    dialect === "pg"
      ? sql`
        DELETE FROM ${table} WHERE ctid IN (
          SELECT ctid FROM ${table} WHERE expires_at <= ${now} LIMIT ${cleanupBatch}
        ) AND expires_at <= ${now}
        RETURNING 1 AS deleted`
      : sql`
        DELETE FROM ${table} WHERE rowid IN (
          SELECT rowid FROM ${table} WHERE expires_at <= ${now} LIMIT ${cleanupBatch}
        )
        RETURNING 1 AS deleted`

  return {
    upsert,
    existing,
    completion,
    renewal,
    removal,
    completedBy,
    deleteBatch,
    cleanupBatch
  }
}

/** The batched statements (PostgreSQL's, see `sqlBatch.ts`) of one store, over its table. */
export const batchedQueries = (sql: SqlClient.SqlClient, tableName: string) => {
  const table = sql(tableName)
  // its VALUES lists type their parameters from nothing: each is cast to its column's type
  const typed = (value: unknown, type: string) => sql`${value}::${sql.literal(type)}`
  const rowsOf = (n: number, perRow: number, row: (at: number) => Statement.Fragment) =>
    sql.csv(Array.from({ length: n }, (_, i) => row(i * perRow)))

  /**
   * The claim upsert for `n` new claims at once (parameters: `now`, then scope, key, fingerprint, token, lease
   * until, expires at of each): as `upsert`, at one `now` for all (the oldest claim's, so no row counts as expired
   * sooner than its own claim saw it). Answers with the rows it took.
   */
  const upsertBatch = batched(sql, CLAIM_PARAMS, 1, (n, p) =>
    sql<WrittenRow>`
      INSERT INTO ${table} (scope, key, fingerprint, token, state, status, headers, body, lease_until, expires_at)
      VALUES ${
      rowsOf(n, CLAIM_PARAMS, (at) =>
        sql`(${typed(p[1 + at], "text")}, ${typed(p[2 + at], "text")}, ${typed(p[3 + at], "text")},
          ${typed(p[4 + at], "text")}, ${IN_PROGRESS}, NULL, NULL, NULL, ${typed(p[5 + at], "bigint")},
          ${typed(p[6 + at], "bigint")})`)
    }
      ${takeover(sql, table, p[0])}
      RETURNING scope, key, token`)

  /**
   * `completion` for `n` completions at once (parameters of each: status, headers, body, expires at, scope,
   * key, token, now): each row's own `now`. Answers with the rows it completed.
   */
  const completionBatch = batched(sql, COMPLETION_PARAMS, 0, (n, p) =>
    sql<WrittenRow>`
      UPDATE ${table} SET state = ${COMPLETED}, status = v.column1, headers = v.column2, body = v.column3,
        lease_until = 0, expires_at = v.column4
      FROM (VALUES ${
      rowsOf(n, COMPLETION_PARAMS, (at) =>
        sql`(${typed(p[at], "integer")}, ${typed(p[1 + at], "text")}, ${typed(p[2 + at], "bytea")},
          ${typed(p[3 + at], "bigint")}, ${typed(p[4 + at], "text")}, ${typed(p[5 + at], "text")},
          ${typed(p[6 + at], "text")}, ${typed(p[7 + at], "bigint")})`)
    }) AS v
      WHERE ${table}.scope = v.column5 AND ${table}.key = v.column6 AND ${table}.token = v.column7
        AND ${table}.state = ${IN_PROGRESS} AND ${table}.expires_at > v.column8
      RETURNING scope, key, token`)

  return { upsertBatch, completionBatch }
}
