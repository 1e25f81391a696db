/**
 * Where the idempotency middleware remembers keys: an atomic claim before the handler runs, the stored
 * response after it, and expiry. Pick an implementation by providing a layer: `layerMemory` (one process),
 * or the SQL and Redis layers when several processes share the keys.
 *
 * Every implementation keeps the same contract, so the middleware (and its tests) do not care which runs:
 *
 * - `claim` is atomic: of many concurrent claims of one fresh `(scope, key)`, exactly one gets `Claimed`.
 * - A record remembers the request's fingerprint; a claim with another fingerprint gets `Mismatch`.
 * - A claim that is in progress answers `InProgress`, unless its lease has run out (its owner died): then the
 *   next claim takes it over with a new token, and the old owner's `complete`/`renew` are refused.
 * - `complete` stores the response and keeps it until the TTL passes; `release` forgets the claim so a
 *   retry runs the handler again.
 *
 * @since 0.1.0
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, type Duration, Effect, Layer, type Scope } from "effect"
import * as internal from "./internal/idempotencyStore.js"
import * as sqlOptions from "./internal/idempotencyStoreSqlOptions.js"
import * as redisOptions from "./internal/redisOptions.js"

/**
 * The parts of a response that are replayed: status, body bytes and a few headers (lower-case names;
 * `content-type` and `location` — never `set-cookie`).
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ClaimRequest {
  /** Who is asking (an API key, an account): keys of different scopes never collide. */
  readonly scope: string
  readonly key: string
  /** A hash of what the request asks for (method, path, body). */
  readonly fingerprint: string
  /** How long a completed record is kept. */
  readonly ttl: Duration.Duration
  /** How long an in-progress claim is honoured without a renewal before another request may take it over. */
  readonly lease: Duration.Duration
}

/**
 * The outcome of a claim.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimResult =
  | { readonly _tag: "Claimed"; readonly token: string }
  | { readonly _tag: "InProgress" }
  | { readonly _tag: "Completed"; readonly response: StoredResponse }
  | { readonly _tag: "Mismatch" }

/**
 * Identifies a claim held by one request: `token` is its fencing token.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimRef {
  readonly scope: string
  readonly key: string
  readonly token: string
}

/**
 * The store failed (unreachable, timed out, corrupt record). The middleware fails closed on it: 503, and the
 * handler does not run.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyStoreError extends Data.TaggedError("IdempotencyStoreError")<{
  readonly operation: "claim" | "complete" | "renew" | "release"
  readonly cause: unknown
}> {
  override get message(): string {
    return `idempotency store ${this.operation} failed: ${String(this.cause)}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Store {
  readonly claim: (request: ClaimRequest) => Effect.Effect<ClaimResult, IdempotencyStoreError>
  /** Stores the response; `false` when `ref` no longer owns the claim (it was taken over or expired). */
  readonly complete: (
    ref: ClaimRef,
    response: StoredResponse,
    ttl: Duration.Duration
  ) => Effect.Effect<boolean, IdempotencyStoreError>
  /** Extends the lease of a claim in progress; `false` when `ref` no longer owns it. */
  readonly renew: (ref: ClaimRef, lease: Duration.Duration) => Effect.Effect<boolean, IdempotencyStoreError>
  /** Forgets a claim in progress (only if `ref` still owns it) so the next request runs again. */
  readonly release: (ref: ClaimRef) => Effect.Effect<void, IdempotencyStoreError>
}

/**
 * The service tag.
 *
 * @since 0.1.0
 * @category tags
 */
export class IdempotencyStore extends Context.Tag("effect-resilience/IdempotencyStore")<IdempotencyStore, Store>() {}

/**
 * An in-memory store for one process. Expired records are removed a few at a time on each call, in
 * expiry order from a binary heap: O(log n) per call, never a sweep of every key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Store & { readonly size: Effect.Effect<number> }> = internal.makeMemory

/**
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<IdempotencyStore> = Layer.effect(IdempotencyStore, internal.makeMemory)

/**
 * Options of the SQL store (`layerSql`, `makeSql`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlOptions {
  /**
   * The table (lower-case letters, digits, `_`); default `effect_resilience_idempotency`. Its index is
   * `<table>_expires_at`.
   */
  readonly table?: string
  /** Create the table and index if missing when the layer is built (default `true`); see `sqlSchema`. */
  readonly migrate?: boolean
  /** Delete expired rows in the background while the layer lives (default `true`). */
  readonly cleanup?: boolean
  /** Pause between two cleanup rounds (default one minute). */
  readonly cleanupInterval?: Duration.DurationInput
  /** Rows deleted per statement at most (default 1000): a round repeats batches until one comes back short. */
  readonly cleanupBatch?: number
  /**
   * A store operation that has not finished by then fails with `IdempotencyStoreError` (the middleware answers
   * 503) and its query is interrupted. Default 2 seconds.
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
 * A store in a SQL table shared by every process that uses the database: SQLite through
 * `@effect/sql-sqlite-node` (one file, zero setup) or PostgreSQL through `@effect/sql-pg`.
 *
 * A claim is one `INSERT … ON CONFLICT (scope, key) DO UPDATE … WHERE <expired or lease run out> RETURNING`
 * statement; completion, renewal and release are one statement each, conditional on the fencing token.
 * Leases and TTLs are decided with the caller's `Clock` (so processes sharing a table need synchronised
 * clocks). Every database failure becomes an `IdempotencyStoreError`. `@effect/sql` is loaded only when the
 * layer is built, so importing this module does not need it.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Layer } from "effect"
 * import { IdempotencyStore } from "effect-resilience"
 *
 * const StoreLive = IdempotencyStore.layerSql().pipe(
 *   Layer.provide(SqliteClient.layer({ filename: "idempotency.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSql = (options?: SqlOptions): Layer.Layer<IdempotencyStore, SqlError, SqlClient> => {
  sqlOptions.resolve(options)
  return Layer.unwrapEffect(
    Effect.promise(() => import("./internal/idempotencyStoreSql.js")).pipe(Effect.map((m) => m.layer(options)))
  )
}

/**
 * Builds the SQL store of `layerSql` in a scope (its cleanup fiber lives as long as the scope).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSql = (options?: SqlOptions): Effect.Effect<SqlStore, SqlError, SqlClient | Scope.Scope> => {
  sqlOptions.resolve(options)
  return Effect.flatMap(Effect.promise(() => import("./internal/idempotencyStoreSql.js")), (m) => m.make(options))
}

/**
 * The statements `layerSql` runs when `migrate` is on (`CREATE TABLE IF NOT EXISTS` and
 * `CREATE INDEX IF NOT EXISTS`), for applications that manage their schema with their own migrations.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sqlSchema: (dialect: "sqlite" | "pg", table?: string) => ReadonlyArray<string> = sqlOptions.sqlSchema

/**
 * Options of the Redis store (`layerRedis`): either a client you own (`client`, an ioredis `Redis` or
 * `Cluster`, never closed by the layer), or a `url` the layer connects to and disconnects from when it
 * is released (`redisOptions` are passed to ioredis).
 *
 * - `prefix`: put before every key (default `"idem:"`); must not contain `{` or `}`.
 * - `timeout`: a call that Redis has not answered by then fails with `IdempotencyStoreError` (default 2 seconds).
 * - `expiryMargin`: how long after a record expired by the caller's clock Redis deletes it (default
 *   1 minute) — the tolerance for clock skew between the processes sharing the store.
 *
 * @since 0.1.0
 * @category models
 */
export type RedisOptions = redisOptions.Connection & redisOptions.CommonOptions

/**
 * A store in Redis (or Redis Cluster) shared by every process that uses it, on `ioredis`. Each
 * operation is one Lua script (`EVALSHA`, falling back to `EVAL`), so a claim is atomic and completion,
 * renewal and release are compare-and-set on the owner's fencing token. Leases and TTLs are decided
 * with the caller's `Clock`. Every Redis error or timeout becomes an `IdempotencyStoreError`, on which
 * the middleware answers 503. `ioredis` is loaded only when the layer is built, so importing this
 * module does not need it. See `docs/stores.md`.
 *
 * Throws `IllegalArgumentException` for a prefix with braces or a malformed duration.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "effect-resilience"
 *
 * const StoreLive = IdempotencyStore.layerRedis({ url: "redis://127.0.0.1:6379", prefix: "shop:idem:" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRedis = (options: RedisOptions): Layer.Layer<IdempotencyStore> => {
  redisOptions.resolve("IdempotencyStore.layerRedis", options, redisOptions.idempotencyDefaults)
  return Layer.unwrapEffect(
    Effect.promise(() => import("./internal/idempotencyStoreRedis.js")).pipe(Effect.map((m) => m.layer(options)))
  )
}
