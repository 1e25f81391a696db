/**
 * The rate limiter store in a SQL table shared by every process that uses the database: PostgreSQL through
 * `@effect/sql-pg` or SQLite through `@effect/sql-sqlite-node`, so a deployment that runs only a database can
 * share its rate limits as well as its idempotency keys. This entry point imports `@effect/sql` (an optional
 * peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Duration, Layer } from "effect"
import * as internal from "../internal/rateLimiterStore/sql.js"
import * as sqlOptions from "../internal/rateLimiterStore/sqlOptions.js"
import type { CleanupOptions } from "../internal/sqlCleanup.js"
import type { RateLimiterStore } from "../RateLimiterStore.js"

/**
 * Options of the SQL store, with the cleanup options every SQL store takes: `cleanup` (delete the rows no longer
 * needed in the background, default `true`), `cleanupInterval` (default one minute) and `cleanupBatch` (rows per
 * statement, default 1000).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends CleanupOptions {
  /**
   * The table (lower-case letters, digits, `_`); default `effect_resilience_rate_limits`. Its index is
   * `<table>_expires_at`.
   */
  readonly table?: string
  /** Create the table and index if missing when the layer is built (default `true`); see {@link schema}. */
  readonly migrate?: boolean
  /**
   * How long after a key is back to its initial state (bucket full, nothing counted) its row is deleted
   * (default one minute): the tolerance for clock skew between the processes sharing the table.
   */
  readonly expiryMargin?: Duration.DurationInput
  /** A decision the database has not answered by then counts as an outage (default 1 second). */
  readonly timeout?: Duration.DurationInput
  /**
   * What an outage (a database error or a timeout) decides: `"deny"` (default: fail closed, with `retryAfter`
   * = `retryAfterOnError`) or `"allow"` (fail open). Either way the decision is marked `outage: true` (the
   * rate-limit middleware answers a denial with 503, not 429) and a warning is logged, at most once every 10
   * seconds.
   */
  readonly onError?: "deny" | "allow"
  /** The `retryAfter` of a denial during an outage (default 1 second). */
  readonly retryAfterOnError?: Duration.DurationInput
}

/**
 * The store as a layer over the `SqlClient` you provide (PostgreSQL or SQLite; another dialect fails the
 * layer with a `SqlError`).
 *
 * Each decision is one `INSERT … ON CONFLICT DO UPDATE … RETURNING` statement: the database locks the key's
 * row, decides with the arithmetic of the memory store at the `nowMillis` the limiter passes (the caller's
 * `Clock`), writes the new state only when the request is admitted, and returns the state it decided on. So
 * the limiters decide exactly as with the memory store, atomically across processes; processes sharing the
 * table need roughly synchronised clocks. See `docs/stores.md`.
 *
 * Throws `IllegalArgumentException` for a malformed table name, batch size, duration or `onError`.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { Effect, Layer, Redacted } from "effect"
 * import { RateLimiter } from "effect-resilience"
 * import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
 *
 * const StoreLive = RateLimiterStoreSql.layer().pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://127.0.0.1:5432/app") }))
 * )
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 10, refillPerSecond: 5, name: "api" })
 *   return yield* limiter.tryAcquire("user-42")
 * }).pipe(Effect.provide(StoreLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options?: Options) => Layer.Layer<RateLimiterStore, SqlError, SqlClient> = internal.layer

/**
 * The statements {@link layer} runs when `migrate` is on (`CREATE TABLE IF NOT EXISTS`, `CREATE INDEX IF NOT
 * EXISTS`), for applications that manage their schema themselves. On PostgreSQL the table is `UNLOGGED`:
 * counters skip the write-ahead log, so a decision costs no WAL flush, and a crash or failover starts every
 * key fresh.
 *
 * @since 0.1.0
 * @category constructors
 */
export const schema: (dialect: "sqlite" | "pg", table?: string) => ReadonlyArray<string> = sqlOptions.sqlSchema
