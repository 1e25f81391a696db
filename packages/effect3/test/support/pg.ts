/**
 * PostgreSQL helpers for the integration tests (`DATABASE_URL`): the client layer, fresh table and stream
 * names, and table cleanup. The service gating (`describePg`) lives in ./services.ts with Redis's.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { available, DATABASE_URL } from "./services.js"

export const databaseUrl = DATABASE_URL
export const PgLive = PgClient.layer({
  url: Redacted.make(databaseUrl),
  connectTimeout: "3 seconds",
  maxConnections: 20
})

const run = `${process.pid}_${Date.now().toString(36)}`
let names = 0
/** A name no other test or run uses (a table or a stream). */
export const freshName = (what: string) => `er_${what}_${run}_${++names}`

/** Drops the tables of a PostgreSQL queue (and any extra tables). */
export const dropPgTables = (tables: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.forEach(
      tables.flatMap((t) => [t, `${t}_dlq`]),
      (t) => sql`DROP TABLE IF EXISTS ${sql(t)}`,
      { discard: true }
    ))

/**
 * Drops `tables` (the array as it is at the end: tests may add to it) once the file's tests are done, when
 * PostgreSQL answered the probe (without it, no table was made).
 */
export const dropAfterAll = (tables: ReadonlyArray<string>) =>
  afterAll(async () => {
    if (!available.postgres || tables.length === 0) return
    await Effect.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => Effect.forEach(tables, (table) => sql`DROP TABLE IF EXISTS ${sql(table)}`, { discard: true })
      ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), connectTimeout: "3 seconds" })))
    )
  })
