/**
 * The SQL rate-limit store: one upsert per decision (see `core/rateLimiterSql.ts`), the reported decision computed
 * by the core from the state the database decided on, a background sweep of rows back to the fresh state,
 * and the Redis store's outage policy (deny or allow, marked `outage: true`, a warning at most every 10 s).
 */
import {
  bind,
  type Call,
  decide,
  type Dialect,
  reconcile,
  type Row,
  stored,
  tokenBucketCall,
  windowCall
} from "@effect-resilience/core/rateLimiterSql"
import { Clock, Duration, Effect, Layer, Schedule, type Scope } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../../RateLimiterStore.js"
import type { Options } from "../../RateLimiterStore/Sql.js"
import { disconnect } from "../sqlTimeouts.js"
import { outagePolicy } from "./outage.js"
import { RateLimiterStore } from "./service.js"
import { resolve, type Resolved, sqlSchema } from "./sqlOptions.js"

/**
 * Fails after `millis` of real time. A real timer on purpose, as the Redis store's: it bounds I/O, which
 * happens in real time, and must fire under `TestClock` too (a test clock that never moves would turn a dead
 * database into a hung call, and a test clock moved by the caller would time out a query still running).
 * It decides nothing about the result.
 */
const timeout = (millis: number) =>
  Effect.callback<never, Error>((resume) => {
    // eslint-disable-next-line no-restricted-globals
    const timer = setTimeout(
      () => resume(Effect.fail(new Error(`no answer from the database within ${millis} ms`))),
      millis
    )
    timer.unref()
    return Effect.sync(() => clearTimeout(timer))
  })

const dialectOf = (sql: SqlClient.SqlClient): Dialect | undefined =>
  sql.onDialectOrElse({ orElse: () => undefined, sqlite: () => "sqlite" as const, pg: () => "pg" as const })

/** Creates the table and index if missing; on PostgreSQL serialised on an advisory lock (see the idempotency store). */
const migrate = (sql: SqlClient.SqlClient, dialect: Dialect, table: string): Effect.Effect<void, SqlError> => {
  const statements = sqlSchema(dialect, table).map((statement) => sql.unsafe(statement).raw)
  return dialect === "pg"
    ? sql.withTransaction(
      Effect.andThen(
        sql`SELECT pg_advisory_xact_lock(hashtext(${table}))`.raw,
        Effect.all(statements, { discard: true })
      )
    )
    : Effect.all(statements, { discard: true })
}

export const make = (options?: Options): Effect.Effect<Store, SqlError, SqlClient.SqlClient | Scope.Scope> => {
  const config = resolve(options)
  return Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const dialect = dialectOf(sql)
    if (dialect === undefined) {
      const message = "RateLimiterStore/Sql supports SQLite and PostgreSQL clients only"
      return yield* new SqlError({ reason: new UnknownError({ cause: new Error(message), message }) })
    }
    if (config.migrate) yield* migrate(sql, dialect, config.table)
    const statements = {
      tb: decide(dialect, config.table, "tb"),
      fw: decide(dialect, config.table, "fw"),
      sw: decide(dialect, config.table, "sw")
    }
    const outage = outagePolicy(config, "RateLimiterStore (sql): the database")

    // the values and the core's decision on the row: core/rateLimiterSql.ts; here only the I/O and the outage policy
    const run = (call: Call, nowMillis: number): Effect.Effect<StoreDecision> =>
      Effect.suspend(() =>
        sql.unsafe<Row>(statements[call.algorithm].text, bind(statements[call.algorithm], call.values))
      ).pipe(
        Effect.flatMap((rows) =>
          rows.length === 1
            ? Effect.try(() => reconcile(call.decision(rows[0]!), stored(rows[0]!.admitted) === 1))
            : Effect.fail(new Error(`the upsert returned ${rows.length} rows`))
        ),
        Effect.catchDefect((defect) => Effect.fail(defect)),
        // the answer does not wait for a query the driver cannot abort
        disconnect,
        Effect.interruptible,
        Effect.raceFirst(timeout(config.timeoutMillis)),
        Effect.catch((cause) => outage(call.limit, nowMillis, cause))
      )

    const store: Store = {
      tokenBucket: (key: string, cost: number, params: TokenBucketParams, nowMillis: number) =>
        run(tokenBucketCall(key, cost, params, nowMillis), nowMillis),
      fixedWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
        run(windowCall("fw", key, cost, params, nowMillis), nowMillis),
      slidingWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
        run(windowCall("sw", key, cost, params, nowMillis), nowMillis)
    }

    if (config.cleanup) {
      yield* deleteExpired(sql, dialect, config).pipe(
        Effect.catchCause((cause) => Effect.logWarning("RateLimiterStore (sql): deleting idle keys failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(config.cleanupIntervalMillis))),
        Effect.delay(Duration.millis(config.cleanupIntervalMillis)),
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    return store
  })
}

/** Deletes rows back to the fresh state `expiryMargin` ago, one bounded batch at a time; the number deleted. */
export const deleteExpired = (
  sql: SqlClient.SqlClient,
  dialect: Dialect,
  config: Pick<Resolved, "table" | "cleanupBatch" | "expiryMarginMillis">
): Effect.Effect<number, SqlError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const table = sql(config.table)
    const before = now - config.expiryMarginMillis
    const id = dialect === "pg" ? sql.literal("ctid") : sql.literal("rowid")
    const batch = sql`
      DELETE FROM ${table} WHERE ${id} IN (
        SELECT ${id} FROM ${table} WHERE expires_at < ${before} LIMIT ${config.cleanupBatch}
      ) AND expires_at < ${before}
      RETURNING 1 AS deleted`
    const loop = (total: number): Effect.Effect<number, SqlError> =>
      Effect.flatMap(
        batch,
        (rows) => rows.length < config.cleanupBatch ? Effect.succeed(total + rows.length) : loop(total + rows.length)
      )
    return loop(0)
  })

export const layer = (options?: Options): Layer.Layer<RateLimiterStore, SqlError, SqlClient.SqlClient> => {
  resolve(options) // checked when called
  return Layer.effect(RateLimiterStore, make(options))
}
