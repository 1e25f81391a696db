/**
 * PostgreSQL helpers for the integration tests (`DATABASE_URL`): the client layer (`@effect/sql-pg` 4, which
 * speaks the wire protocol itself), fresh table names, and table cleanup. The service gating (`describePg`)
 * lives in ./services.ts with Redis's.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { DATABASE_URL } from "./services.js"

export const databaseUrl = DATABASE_URL
export const PgLive = PgClient.layer({
  url: Redacted.make(databaseUrl),
  connectTimeout: "3 seconds",
  maxConnections: 20
})

const run = `${process.pid}_${Date.now().toString(36)}`
let names = 0
/** A name no other test or run uses (a table). */
export const freshName = (what: string) => `er4_${what}_${run}_${++names}`

/** Drops the tables. */
export const dropPgTables = (tables: ReadonlyArray<string>) =>
  SqlClient.SqlClient.use((sql) =>
    Effect.forEach(tables, (t) => sql`DROP TABLE IF EXISTS ${sql(t)}`, { discard: true })
  )
