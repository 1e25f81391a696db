import * as core from "@effect-resilience/core/idempotency"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Duration, Effect, Layer, Option, Runtime, Schedule, type Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { ClaimRef, ClaimRequest, ClaimResult, Store, StoredResponse } from "../../IdempotencyStore.js"
import type { Options as SqlOptions, SqlStore } from "../../IdempotencyStore/Sql.js"
import { DisconnectedTimeouts } from "../timeout.js"
import { IdempotencyStore, IdempotencyStoreError } from "./service.js"
import { batchedWrites, singleWrites, type Writes } from "./sqlBatch.js"
import { resolve, type SqlDialect, sqlSchema } from "./sqlOptions.js"
import { batchedQueries, COMPLETED, type ExistingRow, IN_PROGRESS, queries } from "./sqlQueries.js"

/** Claims that keep losing races (the row changes between the upsert and the read) give up after this many. */
const CLAIM_ATTEMPTS = 3

/** Retries of a statement whose connection was lost (see `retryBroken`), 10 ms apart and doubling. */
const STATEMENT_RETRIES = 5
const RETRY_BASE = Duration.millis(10)

/** SQLSTATE classes and codes of a lost connection: 08 (connection exception), 57P01-57P03 (shut down). */
const lostCodes = /^(08...|57P0[123])$/
/** Node's socket errors and node-postgres's message for a connection closed under a query. */
const lostErrnos = new Set(["ECONNRESET", "EPIPE", "ECONNREFUSED", "ETIMEDOUT"])

/** Is this failure a connection that went away (worth a retry on another one), not a statement's own error? */
export const connectionLost = (error: unknown): boolean => {
  if (!(error instanceof SqlError)) return false
  const cause: unknown = error.cause
  if (typeof cause !== "object" || cause === null) return false
  const code = "code" in cause ? String(cause.code) : ""
  const message = cause instanceof Error ? cause.message : ""
  return lostCodes.test(code) || lostErrnos.has(code) || /^Connection terminated/.test(message)
}

/** Drivers return BIGINT as a string (pg) or a bigint (SQLite with safe integers); both fit a double here. */
const num = (value: unknown): number => {
  const n = Number(value)
  // thrown inside the store's effects, where it becomes an IdempotencyStoreError like any database failure
  if (value === null || value === undefined || Number.isNaN(n)) throw new Error(`corrupt record: ${String(value)}`)
  return n
}

/** Millis stored in BIGINT columns: whole numbers, and an infinite duration becomes "never". */
const instant = (now: number, duration: Duration.Duration): number => {
  const millis = Math.ceil(Duration.toMillis(duration))
  return Number.isFinite(millis) ? Math.min(now + millis, Number.MAX_SAFE_INTEGER) : Number.MAX_SAFE_INTEGER
}

/** The dialects with `INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING`. */
const dialectOf = (sql: SqlClient.SqlClient): SqlDialect | undefined =>
  sql.onDialectOrElse({ orElse: () => undefined, sqlite: () => "sqlite" as const, pg: () => "pg" as const })

/** Creates the table and its index if missing; safe to run from many processes at once. */
export const migrate = (
  sql: SqlClient.SqlClient,
  dialect: SqlDialect,
  table: string
): Effect.Effect<void, SqlError> => {
  const statements = sqlSchema(dialect, table).map((statement) => sql.unsafe(statement).raw)
  return dialect === "pg"
    // concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog: serialise them on an advisory lock
    ? sql.withTransaction(
      Effect.zipRight(
        sql`SELECT pg_advisory_xact_lock(hashtext(${table}))`.raw,
        Effect.all(statements, { discard: true })
      )
    )
    : Effect.all(statements, { discard: true })
}

// Every operation is bounded: a locked table or a saturated pool must become a 503, not a hung request.
// `DisconnectedTimeouts` (`timeoutDisconnected` with one sleeping fiber for all of a store's operations): the
// answer does not wait for a query the driver cannot abort, and the timeout works even where the caller runs
// uninterruptibly (the middleware's claim-to-completion region). Each operation costs a fiber and a place in
// the store's list of deadlines, no timer of its own: a statement is never done at once (pg waits for the
// pool and the server; SQLite's synchronous driver still resumes its fiber once, from the client's lock), so
// a timer per operation was armed, and its fiber forked and interrupted, for every statement.
// The operation is built with the caller's clock (its `now`), and its failures and defects become the
// operation's error inside its own fiber, in one step: every step and wrapper costs an allocation in Effect 3.
const failWith = (timeouts: DisconnectedTimeouts, operation: IdempotencyStoreError["operation"]) => {
  const onTimeout = () =>
    new IdempotencyStoreError({
      operation,
      cause: new Error(`no answer from the database within ${Duration.format(timeouts.duration)}`)
    })
  // a defect (a corrupt record, a driver's throw) as much as a failure; an interruption stays one
  const toError = (cause: Cause.Cause<unknown>): Effect.Effect<never, IdempotencyStoreError> => {
    const defect = Cause.dieOption(cause)
    if (Option.isSome(defect)) return Effect.fail(new IdempotencyStoreError({ operation, cause: defect.value }))
    const failure = Cause.failureOption(cause)
    return Option.isSome(failure)
      ? Effect.fail(new IdempotencyStoreError({ operation, cause: failure.value }))
      : Effect.failCause(cause as Cause.Cause<never>)
  }
  return <A>(build: (clock: Clock.Clock) => Effect.Effect<A, unknown>): Effect.Effect<A, IdempotencyStoreError> =>
    // built inside the operation's fiber: a throw while building is the operation's error too
    timeouts.runWithClock((clock) => Effect.catchAllCause(Effect.suspend(() => build(clock)), toError), onTimeout)
}

/**
 * A statement whose connection was lost — terminated by the server (mid-statement or after its commit),
 * reset, or closed — is tried again after a short pause, at most {@link STATEMENT_RETRIES} times and
 * always within the operation's timeout. The pause matters: the server closes all of a pool's
 * connections at once (a restart, a failover, `pg_terminate_backend`), and the driver notices each
 * one only when it reads from it, so an immediate retry tends to take the next dead idle connection.
 * Safe because every statement here is fenced by the claim's token: a retry after a lost answer finds
 * its own work done (see `claimAttempt` and `complete`). Without it, a completion lost to one broken
 * connection leaves its handled key in progress, and the client's retry runs the handler again once
 * the lease has run out.
 */
const retryBroken = <A, R>(effect: Effect.Effect<A, unknown, R>) =>
  // the schedule is built only after a first lost connection (the pauses are still 10, 20, 40, … ms)
  Effect.catchIf(effect, connectionLost, () =>
    Effect.retry(Effect.delay(effect, RETRY_BASE), {
      schedule: Schedule.exponential(Duration.times(RETRY_BASE, 2)),
      times: STATEMENT_RETRIES - 1,
      while: connectionLost
    }))

/**
 * The decision of `core/idempotency.ts` on the row the upsert did not take. `undefined`: the row changed
 * between the two statements (deleted, expired, lease ran out) so it is claimable now: claim again.
 */
const classify = (
  request: ClaimRequest,
  row: ExistingRow | undefined,
  now: number
): ClaimResult | undefined => {
  const record = row === undefined ? undefined : {
    fingerprint: row.fingerprint,
    completed: num(row.state) === COMPLETED,
    leaseUntil: num(row.lease_until),
    expiresAt: num(row.expires_at)
  }
  switch (core.decideClaim(record, request.fingerprint, now)) {
    case "Mismatch":
      return { _tag: "Mismatch" }
    case "Replay": {
      const response: StoredResponse = {
        status: num(row!.status),
        headers: JSON.parse(row!.headers ?? "{}"),
        body: row!.body === null ? new Uint8Array() : new Uint8Array(row!.body)
      }
      return { _tag: "Completed", response }
    }
    case "InProgress":
      return { _tag: "InProgress" }
    case "New":
    case "Reclaim":
      return undefined
  }
}

/** The store's operations: each bounded by `timeouts` (see `failWith`) and tried again on a lost connection. */
const operations = (statements: ReturnType<typeof queries>, timeouts: DisconnectedTimeouts, writes: Writes) => {
  const { cleanupBatch, completedBy, deleteBatch, existing, removal, renewal, upsert } = statements
  const timeoutClaim = failWith(timeouts, "claim")
  const timeoutComplete = failWith(timeouts, "complete")
  const timeoutRenew = failWith(timeouts, "renew")
  const timeoutRelease = failWith(timeouts, "release")

  /**
   * `token` is one claim's, the same in all its attempts and in their retries: a retry after a lost answer
   * (the connection broke after an upsert committed, `retryBroken` starts again from the first attempt)
   * finds its own token in the row, and that is this claim's success. A new token per attempt would make
   * the committed claim of a later attempt look like another request's (InProgress until its lease).
   */
  const claimAttempt = (
    request: ClaimRequest,
    now: number,
    token: string,
    attempt: number
  ): Effect.Effect<ClaimResult, unknown> => {
    const leaseUntil = instant(now, request.lease)
    const expiresAt = instant(now, request.ttl)
    const { fingerprint, key, scope } = request
    return Effect.flatMap(
      // a claim that lost a race claims again alone, at its own `now`
      attempt === 0
        ? writes.claim({ scope, key, fingerprint, token, leaseUntil, expiresAt, now })
        : Effect.map(upsert(scope, key, fingerprint, token, leaseUntil, expiresAt, now), (rows) => rows.length > 0),
      (inserted) =>
        inserted
          ? Effect.succeed<ClaimResult>({ _tag: "Claimed", token })
          : Effect.flatMap(existing(request.scope, request.key, request.fingerprint), (rows) =>
            Effect.suspend(() => {
              const row = rows[0]
              if (row !== undefined && row.token === token && num(row.state) === IN_PROGRESS) {
                return Effect.succeed<ClaimResult>({ _tag: "Claimed", token })
              }
              const result = classify(request, row, now)
              if (result !== undefined) return Effect.succeed(result)
              return attempt + 1 < CLAIM_ATTEMPTS
                ? claimAttempt(request, now, token, attempt + 1)
                : Effect.fail(`the record kept changing during ${CLAIM_ATTEMPTS} claims`)
            }))
    )
  }

  const claim = (request: ClaimRequest) =>
    timeoutClaim((clock) => retryBroken(claimAttempt(request, clock.unsafeCurrentTimeMillis(), randomUUID(), 0)))

  const complete = (ref: ClaimRef, response: StoredResponse, ttl: Duration.Duration) =>
    timeoutComplete((clock) => completeOnce(clock, ref, response, ttl))

  const completeOnce = (clock: Clock.Clock, ref: ClaimRef, response: StoredResponse, ttl: Duration.Duration) => {
    let failed = false
    const headers = JSON.stringify(response.headers)
    // each attempt at its own now
    const attempt = Effect.matchEffect(
      Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        const { body, status } = response
        return writes.complete({ status, headers, body, expiresAt: instant(now, ttl), ref, now })
      }),
      {
        onFailure: (error) => {
          failed = true
          return Effect.fail(error)
        },
        onSuccess: (done) => done ? Effect.succeed(true) : failed ? completedBy(ref) : Effect.succeed(false)
      }
    )
    return retryBroken(attempt)
  }

  const renew = (ref: ClaimRef, lease: Duration.Duration) =>
    timeoutRenew((clock) =>
      Effect.map(
        retryBroken(Effect.suspend(() => {
          const now = clock.unsafeCurrentTimeMillis()
          return renewal(instant(now, lease), ref.scope, ref.key, ref.token, now)
        })),
        (rows) => rows.length > 0
      )
    )

  const release = (ref: ClaimRef) =>
    timeoutRelease((clock) =>
      Effect.asVoid(
        retryBroken(Effect.suspend(() => removal(ref.scope, ref.key, ref.token, clock.unsafeCurrentTimeMillis()).raw))
      )
    )

  /** Deletes expired rows one bounded batch (one short statement) at a time until a batch comes back short. */
  const deleteExpired: Effect.Effect<number, SqlError> = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const loop = (total: number): Effect.Effect<number, SqlError> =>
      Effect.flatMap(
        deleteBatch(now),
        (rows) => rows.length < cleanupBatch ? Effect.succeed(total + rows.length) : loop(total + rows.length)
      )
    return loop(0)
  })

  return { claim, complete, renew, release, deleteExpired }
}

/** Options are checked when called (the one rule); the store is built when run. */
export const make = (
  options?: SqlOptions
): Effect.Effect<SqlStore, SqlError, SqlClient.SqlClient | Scope.Scope> => {
  const config = resolve(options)
  return Effect.gen(function*() {
    // column names are ours: a client's camelCase transforms must not rename them
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const dialect = dialectOf(sql)
    if (dialect === undefined) {
      return yield* new SqlError({
        message: "IdempotencyStore/Sql supports SQLite and PostgreSQL clients only"
      })
    }
    if (config.migrate) yield* migrate(sql, dialect, config.table)
    const timeouts = new DisconnectedTimeouts(config.timeout)
    yield* Effect.addFinalizer(() => timeouts.shutdown)
    const statements = queries(sql, dialect, config)
    // on PostgreSQL a batched statement runs in a fiber of its own, from the store's runtime; like every
    // operation's it ends when its statement does, even after the store's scope (a closed client fails it at once)
    const writes = dialect === "pg"
      ? batchedWrites(
        batchedQueries(sql, config.table),
        Runtime.runFork(yield* Effect.runtime<never>()),
        (error) => !connectionLost(error)
      )
      : singleWrites(statements)
    const { claim, complete, deleteExpired, release, renew } = operations(statements, timeouts, writes)

    if (config.cleanup) {
      yield* deleteExpired.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("idempotency: deleting expired records failed", cause)),
        Effect.repeat(Schedule.spaced(config.cleanupInterval)),
        Effect.delay(config.cleanupInterval),
        Effect.interruptible,
        Effect.forkScoped
      )
    }

    const store: Store = { claim, complete, renew, release }
    return { ...store, deleteExpired, dialect, table: config.table }
  })
}

export const layer = (options?: SqlOptions): Layer.Layer<IdempotencyStore, SqlError, SqlClient.SqlClient> =>
  Layer.scoped(IdempotencyStore, make(options))
