/**
 * Table cleanup for the queue suites on PostgreSQL: each test names its tables with `queueFreshName` (from the
 * adapter) and records them; once the file's tests are done they are dropped, with a queue's dead letters
 * (`<table>_dlq`). Not a suite: a helper the PostgreSQL suites share.
 */
import { queueFreshName, queuePgClient, SqlClientModule as SqlClient } from "#edition"
import { afterAll } from "@effect/vitest"
import { Effect } from "effect"

/** Drops `tables` and their dead-letter tables, if they exist. */
export const dropPgTables = (tables: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const t of tables.flatMap((t) => [t, `${t}_dlq`])) yield* sql`DROP TABLE IF EXISTS ${sql(t)}`
  })

/** A fresh-name maker whose tables are dropped after the file's tests (when any was made). */
export const pgTables = () => {
  const created: Array<string> = []
  afterAll(async () => {
    if (created.length === 0) return
    await Effect.runPromise(dropPgTables(created).pipe(Effect.provide(queuePgClient), Effect.ignore))
  })
  return {
    created,
    fresh: (what: string) => {
      const name = queueFreshName(what)
      created.push(name)
      return name
    }
  }
}
