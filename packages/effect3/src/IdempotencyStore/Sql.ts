/**
 * The idempotency store in a SQL table shared by every process that uses the database: SQLite through
 * `@effect/sql-sqlite-node` (one file, zero setup) or PostgreSQL through `@effect/sql-pg`, or any other
 * `@effect/sql` client you provide. This entry point imports `@effect/sql` (an optional peer dependency);
 * the package root does not.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Duration, Effect, Layer, Scope } from "effect"
import type { IdempotencyStore, Store } from "../IdempotencyStore.js"
import * as internal from "../internal/idempotencyStore/sql.js"
import * as sqlOptions from "../internal/idempotencyStore/sqlOptions.js"
import type { CleanupOptions } from "../internal/sqlCleanup.js"

/**
 * Options of the SQL store (`layer`, `make`), with the cleanup options every SQL store takes: `cleanup` (delete the rows no longer
 * needed in the background, default `true`), `cleanupInterval` (default one minute) and `cleanupBatch` (rows per
 * statement, default 1000).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends CleanupOptions {
  /**
   * The table (lower-case letters, digits, `_`); default `effect_resilience_idempotency`. Its index is
   * `<table>_expires_at`.
   */
  readonly table?: string
  /** Create the table and index if missing when the layer is built (default `true`); see `migrations`. */
  readonly migrate?: boolean
  /**
   * A store operation that has not finished by then fails with `IdempotencyStoreError` (the middleware answers
   * 503) and its query is interrupted. Default 2 seconds. Within it, a statement whose connection was lost
   * (terminated by the server, reset) is tried again, up to 5 times, 10 ms apart and doubling: every statement
   * is fenced by the claim's token, so a retry after a lost answer finds its own work done.
   */
  readonly timeout?: Duration.DurationInput
}

/**
 * The SQL store: the `Store` plus its cleanup step, for jobs that prefer to run it themselves.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStore extends Store {
  /** Deletes every row expired by the `Clock`'s now, in batches of `cleanupBatch`; the number deleted. */
  readonly deleteExpired: Effect.Effect<number, SqlError>
  readonly dialect: "sqlite" | "pg"
  readonly table: string
}

/**
 * The store as a layer over the `SqlClient` you provide.
 *
 * A claim is one `INSERT … ON CONFLICT (scope, key) DO UPDATE … WHERE <expired or lease run out> RETURNING`
 * statement; completion, renewal and release are one statement each, conditional on the fencing token.
 * Leases and TTLs are decided with the caller's `Clock` (so processes sharing a table need synchronised
 * clocks). Every database failure becomes an `IdempotencyStoreError`. See `docs/stores.md`.
 *
 * Throws `IllegalArgumentException` for a malformed table name, batch size or duration.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Layer } from "effect"
 * import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
 *
 * const StoreLive = IdempotencyStoreSql.layer().pipe(
 *   Layer.provide(SqliteClient.layer({ filename: "idempotency.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options?: Options) => Layer.Layer<IdempotencyStore, SqlError, SqlClient> = internal.layer

/**
 * Builds the store of {@link layer} in a scope (its cleanup fiber lives as long as the scope).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<SqlStore, SqlError, SqlClient | Scope.Scope> = internal.make

/**
 * The statements {@link layer} runs when `migrate` is on (`CREATE TABLE IF NOT EXISTS` and
 * `CREATE INDEX IF NOT EXISTS`), for applications that manage their schema with their own migrations.
 *
 * @since 0.1.0
 * @category constructors
 */
export const migrations: (dialect: "sqlite" | "pg", table?: string) => ReadonlyArray<string> = sqlOptions.sqlSchema
