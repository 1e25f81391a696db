/**
 * An `effect/sql` client for SQLite on Node's built-in `node:sqlite`: the embedded database behind the
 * library's SQL backends (`IdempotencyStore/Sql`, `RateLimiterStore/Sql`, `Consumer/Sql`, `Outbox`) when one
 * file on one machine is enough. Several processes may share the file: writes are serialised by SQLite's lock,
 * and a statement waits up to `busyTimeout` for it.
 *
 * Why it exists: Effect 4 has no working SQLite driver yet (`@effect/sql-sqlite-node` 4.x is a beta that does not
 * load with `effect` 4.1). This client provides the same `SqlClient` service, so replacing it with Effect's own
 * once that ships changes one layer, and nothing in the database file. It is built on `node:sqlite` rather than
 * better-sqlite3 because it needs nothing installed (no native addon to build or download) on the Node versions
 * this edition supports (22.19+). Node 22 prints one `ExperimentalWarning` when `node:sqlite` is first loaded;
 * Node 24.15+ does not (`node:sqlite` is a release candidate there).
 *
 * What it runs: every statement form of `effect/sql` except streams (`.stream` dies), with transactions
 * (`sql.withTransaction`) on its one connection. Statements are synchronous, as they are with every Node SQLite
 * driver: a statement that waits for a lock held by another process blocks the event loop for up to
 * `busyTimeout`.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Layer, Scope } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as internal from "./internal/sqlite/client.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Config {
  /** The database file, created if missing; `":memory:"` for a private in-memory database. */
  readonly filename: string
  /** Open the file read-only (default `false`). */
  readonly readonly?: boolean
  /**
   * How long a statement waits for a lock another connection or process holds before it fails with a
   * `LockTimeoutError` (default 5 seconds, as better-sqlite3's).
   */
  readonly busyTimeout?: Duration.Input
  /** Keep SQLite's rollback journal instead of switching the file to write-ahead logging (default `false`). */
  readonly disableWAL?: boolean
  /**
   * With write-ahead logging: `"normal"` (the default, what the Effect 3 edition's better-sqlite3 runs with)
   * syncs the log to disk at checkpoints, not at every commit; a crash of the process loses nothing, a power
   * loss may lose the last commits (a claim or a completion lost so lets a retry run its handler again).
   * `"full"` syncs at every commit: nothing is lost, and each write costs a disk flush (several times slower;
   * the edition's README has figures).
   */
  readonly synchronous?: "normal" | "full"
  /** Prepared statements kept, least recently used dropped first (default 200). */
  readonly prepareCacheSize?: number
  readonly transformResultNames?: (name: string) => string
  readonly transformQueryNames?: (name: string) => string
  readonly spanAttributes?: Readonly<Record<string, unknown>>
}

/**
 * Opens the database in a scope (closed with it). Fails with a `SqlError` when the file cannot be opened;
 * throws `Cause.IllegalArgumentError` for invalid options.
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (config: Config) => Effect.Effect<SqlClient, SqlError, Scope.Scope> = internal.make

/**
 * The client as the `SqlClient` service.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
 * import * as Sqlite from "effect-resilience/Sqlite"
 *
 * const StoreLive = IdempotencyStoreSql.layer().pipe(Layer.provide(Sqlite.layer({ filename: "idempotency.db" })))
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: (config: Config) => Layer.Layer<SqlClient, SqlError> = internal.layer
