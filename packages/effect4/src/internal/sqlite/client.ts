/**
 * An `effect/sql` client over Node's built-in SQLite (`node:sqlite`, `DatabaseSync`): one connection, shared
 * through a semaphore (`SqlClient.makeSqliteAcquirers`), with a bounded cache of prepared statements. It runs
 * what the library's SQL backends send — statements with and without `RETURNING`, `.raw`, `.unsafe`, `.values`,
 * transactions — and no streams. See `Sqlite.ts` for why it exists.
 */
import { Effect, Layer, Semaphore, Stream } from "effect"
import type { Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { classifySqliteError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { DatabaseSync, type StatementSync } from "node:sqlite"
import type { Config } from "../../Sqlite.js"
import * as validate from "../validate.js"

/**
 * node:sqlite puts SQLite's extended result code in `errcode`; `classifySqliteError` reads `errno` (as
 * better-sqlite3 and the other drivers name it), so `SQLITE_BUSY` becomes a `LockTimeoutError` and so on.
 */
const sqlError = (cause: unknown, message: string, operation: string): SqlError => {
  if (typeof cause === "object" && cause !== null && "errcode" in cause && !("errno" in cause)) {
    Object.assign(cause, { errno: cause.errcode })
  }
  return new SqlError({ reason: classifySqliteError(cause, { message, operation }) })
}

type Mode = "rows" | "raw" | "values"

interface Resolved {
  readonly filename: string
  readonly readonly: boolean
  readonly busyTimeoutMillis: number
  readonly wal: boolean
  readonly synchronous: "normal" | "full"
  readonly cacheSize: number
}

const resolve = (config: Config): Resolved => {
  if (typeof config?.filename !== "string" || config.filename === "") {
    validate.invalid(`Sqlite filename must be a non-empty string, got ${String(config?.filename)}`)
  }
  const busyTimeoutMillis = validate.millis("Sqlite busyTimeout", config.busyTimeout ?? "5 seconds", { finite: true })
  if (busyTimeoutMillis > 2 ** 31 - 1) validate.invalid("Sqlite busyTimeout must be below 2^31 milliseconds")
  return {
    filename: config.filename,
    readonly: config.readonly ?? false,
    busyTimeoutMillis: Math.round(busyTimeoutMillis),
    wal: config.disableWAL !== true,
    synchronous: config.synchronous === undefined
      ? "normal"
      : config.synchronous === "normal" || config.synchronous === "full"
      ? config.synchronous
      : validate.invalid(`Sqlite synchronous must be "normal" or "full", got ${String(config.synchronous)}`),
    cacheSize: validate.positiveInt("Sqlite prepareCacheSize", config.prepareCacheSize ?? 200)
  }
}

/** Options are checked when called; the database is opened when run, and closed with the scope. */
export const make = (config: Config): Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope> => {
  const options = resolve(config)
  return Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          const db = new DatabaseSync(options.filename, {
            readOnly: options.readonly,
            // SQLite's busy handler: a write waits this long for another connection's (or process's) lock
            timeout: options.busyTimeoutMillis
          })
          try {
            if (options.wal && !options.readonly) db.exec("PRAGMA journal_mode = WAL")
            // what better-sqlite3 builds SQLite with (SQLITE_DEFAULT_WAL_SYNCHRONOUS=1), so what the Effect 3
            // edition's SQLite store runs with; node:sqlite's SQLite keeps FULL, an fsync per commit
            if (options.wal) db.exec(`PRAGMA synchronous = ${options.synchronous === "full" ? "FULL" : "NORMAL"}`)
          } catch (cause) {
            db.close()
            throw cause
          }
          return db
        },
        catch: (cause) => sqlError(cause, `Failed to open ${options.filename}`, "connect")
      }),
      (db) => Effect.sync(() => db.isOpen && db.close())
    )

    // least recently used first: a Map keeps insertion order, and a hit moves its statement to the end
    const cache = new Map<string, StatementSync>()
    const prepared = (sql: string): StatementSync => {
      const hit = cache.get(sql)
      if (hit !== undefined) {
        cache.delete(sql)
        cache.set(sql, hit)
        return hit
      }
      const statement = db.prepare(sql)
      cache.set(sql, statement)
      if (cache.size > options.cacheSize) cache.delete(cache.keys().next().value!)
      return statement
    }

    const run = (sql: string, params: ReadonlyArray<unknown>, mode: Mode, cached: boolean) =>
      Effect.withFiber<any, SqlError>((fiber) => {
        try {
          const statement = cached ? prepared(sql) : db.prepare(sql)
          statement.setReadBigInts(fiber.getRef(SqlClient.SafeIntegers))
          statement.setReturnArrays(mode === "values")
          const args = params as Array<any>
          if (statement.columns().length > 0) return Effect.succeed(statement.all(...args))
          const result = statement.run(...args)
          return Effect.succeed(mode === "raw" ? result : [])
        } catch (cause) {
          return Effect.fail(sqlError(cause, "Failed to execute statement", "execute"))
        }
      })

    type Rows = <A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>
    const rows = (effect: Effect.Effect<ReadonlyArray<any>, SqlError>, transform: Rows | undefined) =>
      transform === undefined ? effect : Effect.map(effect, transform)

    const connection: Connection = {
      execute: (sql, params, transform) => rows(run(sql, params, "rows", true), transform),
      executeRaw: (sql, params) => run(sql, params, "raw", true),
      executeValues: (sql, params) => run(sql, params, "values", true),
      executeValuesUnprepared: (sql, params) => run(sql, params, "values", false),
      executeUnprepared: (sql, params, transform) => rows(run(sql, params ?? [], "rows", false), transform),
      executeStream: () => Stream.die(new Error("effect-resilience/Sqlite does not stream query results"))
    }

    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: Semaphore.makeUnsafe(1),
      isTransaction: () => db.isOpen && db.isTransaction
    })
    return yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(config.transformQueryNames),
      driver: "node:sqlite",
      spanAttributes: [...Object.entries(config.spanAttributes ?? {}), ["db.system.name", "sqlite"]],
      transformRows: config.transformResultNames === undefined
        ? undefined
        : Statement.defaultTransforms(config.transformResultNames).array
    }).pipe(Effect.provide(Reactivity.layer))
  })
}

export const layer = (config: Config): Layer.Layer<SqlClient.SqlClient, SqlError> =>
  Layer.effect(SqlClient.SqlClient, make(config))
