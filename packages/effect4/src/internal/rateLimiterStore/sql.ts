/**
 * The SQL rate-limit store: one upsert per decision (see `sqlStatements.ts`), the reported decision computed
 * by the core from the state the database decided on, a background sweep of rows back to the fresh state,
 * and the Redis store's outage policy (deny or allow, marked `outage: true`, a warning at most every 10 s).
 */
import { Clock, Duration, Effect, Layer, Schedule, type Scope } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import { EPS } from "../../core/rateLimit.js"
import * as RateWindows from "../../core/rateWindows.js"
import * as TokenBucket from "../../core/tokenBucket.js"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../../RateLimiterStore.js"
import type { Options } from "../../RateLimiterStore/Sql.js"
import { disconnect } from "../idempotencyStore/sql.js"
import { RateLimiterStore } from "./service.js"
import { resolve, type Resolved, sqlSchema } from "./sqlOptions.js"
import { type Algorithm, bind, decide, type Dialect } from "./sqlStatements.js"

interface Row {
  readonly admitted: unknown
  readonly was_at_ms: unknown
  readonly was_units: unknown
  readonly was_previous_units: unknown
}

type Values = Record<string, string | number | null>

/** A stored double, or `null` for the fresh state; drivers may hand back strings for numeric columns. */
const stored = (value: unknown): number | null => {
  if (value === null || value === undefined) return null
  const n = Number(value)
  if (Number.isNaN(n)) throw new Error(`corrupt rate-limit row: ${String(value)}`)
  return n
}

/**
 * The core's decision on the state the statement found. Its `allowed` is the database's: they are the same
 * arithmetic on the same doubles, and should a database ever round otherwise, what it wrote is what counts.
 */
const reconcile = (decision: StoreDecision, admitted: boolean): StoreDecision =>
  decision.allowed === admitted ? decision : {
    ...decision,
    allowed: admitted,
    retryAfterMillis: admitted ? 0 : Math.max(1, decision.retryAfterMillis)
  }

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

/** How often at most an outage is logged: every failing decision would flood the log. */
const WARN_EVERY_MILLIS = 10_000

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

/**
 * The insert of a key never seen: the core's step on the fresh state. A denial stores the fresh state,
 * already expired (a row must exist for `RETURNING`; the sweep takes it).
 */
const inserted = (step: { readonly decision: StoreDecision; readonly expiresAt: number }, now: number, state: {
  readonly at: number
  readonly units: number | null
  readonly previous: number | null
}) =>
  step.decision.allowed
    ? {
      ins_at: state.at,
      ins_units: state.units,
      ins_previous: state.previous,
      ins_admitted: 1,
      ins_expires: step.expiresAt
    }
    : { ins_at: null, ins_units: null, ins_previous: null, ins_admitted: 0, ins_expires: now }

const windowState = (row: Row): RateWindows.State => {
  const start = stored(row.was_at_ms)
  return start === null
    ? RateWindows.fresh
    : { start, current: stored(row.was_units) ?? 0, previous: stored(row.was_previous_units) ?? 0 }
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
    const outage = outagePolicy(config)

    const run = (
      algorithm: Algorithm,
      limit: number,
      nowMillis: number,
      values: Values,
      decision: (row: Row) => StoreDecision
    ): Effect.Effect<StoreDecision> =>
      Effect.suspend(() => sql.unsafe<Row>(statements[algorithm].text, bind(statements[algorithm], values))).pipe(
        Effect.flatMap((rows) =>
          rows.length === 1
            ? Effect.try(() => reconcile(decision(rows[0]!), stored(rows[0]!.admitted) === 1))
            : Effect.fail(new Error(`the upsert returned ${rows.length} rows`))
        ),
        Effect.catchDefect((defect) => Effect.fail(defect)),
        // the answer does not wait for a query the driver cannot abort
        disconnect,
        Effect.interruptible,
        Effect.raceFirst(timeout(config.timeoutMillis)),
        Effect.catch((cause) => outage(limit, nowMillis, cause))
      )

    const tokenBucket = (key: string, cost: number, params: TokenBucketParams, nowMillis: number) => {
      const core = { capacity: params.capacity, refillPerSecond: params.refillPerSecond }
      const interval = 1000 / params.refillPerSecond
      const first = TokenBucket.take(TokenBucket.fresh, cost, core, nowMillis)
      return run("tb", params.capacity, nowMillis, {
        algorithm: "tb",
        name: params.name,
        key,
        ...inserted(first, nowMillis, { at: first.state, units: null, previous: null }),
        now: nowMillis,
        cost,
        capacity: params.capacity,
        cost_interval: cost * interval,
        tau: params.capacity * interval,
        eps: EPS
      }, (row) => TokenBucket.take(stored(row.was_at_ms) ?? TokenBucket.fresh, cost, core, nowMillis).decision)
    }

    const window = (algorithm: "fw" | "sw") => (key: string, cost: number, params: WindowParams, nowMillis: number) => {
      const step = algorithm === "fw" ? RateWindows.fixedWindow : RateWindows.slidingWindow
      const core = { limit: params.limit, windowMillis: params.windowMillis }
      const w = params.windowMillis
      const start = Math.floor(nowMillis / w) * w
      const index = Math.round(start / w)
      const first = step(RateWindows.fresh, cost, core, nowMillis)
      const s = first.state
      return run(algorithm, params.limit, nowMillis, {
        algorithm,
        name: params.name,
        key,
        ...inserted(first, nowMillis, { at: s.start, units: s.current, previous: s.previous }),
        now: nowMillis,
        cost,
        limit: params.limit,
        start,
        window: w,
        eps: EPS,
        lo: index - 1.5,
        hi: index - 0.5
      }, (row) => step(windowState(row), cost, core, nowMillis).decision)
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

    const store: Store = { tokenBucket, fixedWindow: window("fw"), slidingWindow: window("sw") }
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

/** What an outage decides, logged at most every {@link WARN_EVERY_MILLIS} (of the limiter's clock). */
const outagePolicy = (config: Resolved) => {
  let lastWarning = -Infinity
  let suppressed = 0
  return (limit: number, nowMillis: number, cause: unknown): Effect.Effect<StoreDecision> => {
    const decision: StoreDecision = config.onError === "allow"
      ? { allowed: true, limit, remaining: 0, retryAfterMillis: 0, resetAfterMillis: 0, outage: true }
      : {
        allowed: false,
        limit,
        remaining: 0,
        retryAfterMillis: config.retryAfterOnErrorMillis,
        resetAfterMillis: config.retryAfterOnErrorMillis,
        outage: true
      }
    if (nowMillis - lastWarning < WARN_EVERY_MILLIS) {
      suppressed++
      return Effect.succeed(decision)
    }
    const skipped = suppressed
    lastWarning = nowMillis
    suppressed = 0
    return Effect.as(
      Effect.logWarning(
        `RateLimiterStore (sql): the database failed, ${config.onError === "allow" ? "allowing" : "denying"} requests`,
        cause
      ).pipe(Effect.annotateLogs({ onError: config.onError, suppressedWarnings: skipped })),
      decision
    )
  }
}

export const layer = (options?: Options): Layer.Layer<RateLimiterStore, SqlError, SqlClient.SqlClient> => {
  resolve(options) // checked when called
  return Layer.effect(RateLimiterStore, make(options))
}
