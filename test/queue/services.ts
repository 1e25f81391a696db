/**
 * The services the queue tests use: PostgreSQL (`DATABASE_URL`, default
 * `postgres://postgres@127.0.0.1:5432/test`) and Redis (`REDIS_URL`, via ../support/redis.ts). Without
 * one, its tests are skipped locally (with a note) and fail in CI (`CI=true`).
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"

export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
export const PgLive = PgClient.layer({
  url: Redacted.make(databaseUrl),
  connectTimeout: "3 seconds",
  maxConnections: 20
})

const pgError = await Effect.runPromise(
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`).pipe(
    Effect.provide(PgLive),
    Effect.match({ onFailure: (e) => String(e), onSuccess: () => undefined })
  )
)

const inCI = process.env.CI === "true" || process.env.CI === "1"

/** Registers `body` when PostgreSQL is reachable; otherwise skips it locally and fails it in CI. */
export const describePg = (name: string, body: () => void) => {
  if (pgError === undefined) return describe(name, body)
  if (inCI) {
    return describe(name, () => {
      it(`needs PostgreSQL at ${databaseUrl} (CI=true: a missing service fails the run)`, () => {
        throw new Error(`PostgreSQL is not reachable at ${databaseUrl}: ${pgError}`)
      })
    })
  }
  console.warn(`[pg] ${name}: skipped — no PostgreSQL at ${databaseUrl} (${pgError})`)
  return describe.skip(name, body)
}

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
