/**
 * `IdempotencyStore/Sql` on PostgreSQL (`@effect/sql-pg` 4) when the server terminates a connection in the middle
 * of a statement (`pg_terminate_backend`, as a failover or an administrator does): the statement is tried again
 * on another connection, so a completion is not lost to one broken connection — lost, it would leave its handled
 * key in progress, and a client's retry would run the handler again once the lease ran out. Ported from the
 * root's test of the same name; what differs is how a lost connection is recognised (`connectionLost`): sql-pg 4
 * has no `pg`, and its errors carry a `reason`.
 *
 * To hit a statement in flight every time, another transaction locks the table, the store's statement
 * queues behind the lock, and its backend — found in `pg_stat_activity` waiting on that lock — is terminated.
 */
import { afterAll, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { ConnectionError, SqlError, UniqueViolation, UnknownError } from "effect/sql/SqlError"
import * as IdempotencyStoreSql from "../src/IdempotencyStore/Sql.js"
import type { IdempotencyStore } from "../src/index.js"
import { connectionLost } from "../src/internal/idempotencyStore/sql.js"
import { eventually } from "./support/eventually.js"
import { dropPgTables, freshName, PgLive } from "./support/pg.js"
import { available, describePg } from "./support/services.js"

const tables: Array<string> = []
const freshTable = () => {
  const table = freshName("idem_term")
  tables.push(table)
  return table
}

afterAll(async () => {
  if (!available.postgres || tables.length === 0) return
  await Effect.runPromise(dropPgTables(tables).pipe(Effect.provide(PgLive)))
})

const request = (key: string): IdempotencyStore.ClaimRequest => ({
  scope: "s",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.minutes(1)
})

const response: IdempotencyStore.StoredResponse = {
  status: 201,
  headers: { location: "/orders/1" },
  body: new TextEncoder().encode("{\"id\":1}")
}

/**
 * Runs `operation` while another transaction holds `table` locked against writes; terminates the backend
 * whose statement (starting with `statement`) waits on that lock, then lets the lock go. Returns the
 * operation's exit and how many backends were terminated.
 */
const terminatedMidStatement = <A, E>(table: string, statement: string, operation: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const unlock = yield* Deferred.make<void>()
    const holder = yield* Effect.forkChild(
      sql.withTransaction(
        Effect.andThen(
          sql`LOCK TABLE ${sql(table)} IN SHARE ROW EXCLUSIVE MODE`,
          Effect.andThen(Deferred.succeed(locked, undefined), Deferred.await(unlock))
        )
      )
    )
    yield* Deferred.await(locked)
    const fiber = yield* Effect.forkChild(Effect.exit(operation))
    let terminated = 0
    yield* eventually(
      Effect.map(
        // in the select list, the function runs only for the rows the WHERE kept (in a WHERE, the planner
        // may call it before the other conditions, on every backend)
        sql<{ readonly killed: boolean }>`
          SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'
            AND ltrim(query, E' \\n') LIKE ${`${statement} "${table}"%`}`,
        (rows) => (terminated += rows.filter((r) => r.killed).length) > 0
      ),
      { within: "20 seconds" }
    ).pipe(
      // the lock goes however this ends: a test failing here must not leave the statement queued behind it
      Effect.ensuring(Deferred.succeed(unlock, undefined))
    )
    yield* Fiber.join(holder)
    return { exit: yield* Fiber.join(fiber), terminated }
  })

describePg("IdempotencyStore/Sql (PostgreSQL): connections terminated mid-statement", () => {
  it.live("complete: retried on another connection, the response is stored and replayed", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const store = yield* IdempotencyStoreSql.make({ table, cleanup: false, timeout: "20 seconds" })
      const claimed = yield* store.claim(request("k1"))
      if (claimed._tag !== "Claimed") return expect.fail(`expected Claimed, got ${claimed._tag}`)
      const ref = { scope: "s", key: "k1", token: claimed.token }
      const { exit, terminated } = yield* terminatedMidStatement(
        table,
        "UPDATE",
        store.complete(ref, response, Duration.hours(1))
      )
      expect(terminated).toBe(1)
      expect(Exit.isSuccess(exit) && exit.value).toBe(true)
      const replay = yield* store.claim(request("k1"))
      expect(replay._tag).toBe("Completed")
      if (replay._tag === "Completed") {
        expect(replay.response.status).toBe(201)
        expect(new TextDecoder().decode(replay.response.body)).toBe("{\"id\":1}")
      }
    }).pipe(Effect.provide(PgLive)))

  it.live("claim: retried on another connection, it claims once; the next claim is InProgress", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const store = yield* IdempotencyStoreSql.make({ table, cleanup: false, timeout: "20 seconds" })
      const { exit, terminated } = yield* terminatedMidStatement(table, "INSERT INTO", store.claim(request("k2")))
      expect(terminated).toBe(1)
      expect(Exit.isSuccess(exit) && exit.value._tag).toBe("Claimed")
      expect((yield* store.claim(request("k2")))._tag).toBe("InProgress")
    }).pipe(Effect.provide(PgLive)))

  it("only a lost connection is retried, not a statement's own error", () => {
    const unknown = (cause: unknown) => connectionLost(new SqlError({ reason: new UnknownError({ cause }) }))
    const connection = (cause: unknown, operation?: string) =>
      connectionLost(
        new SqlError({ reason: new ConnectionError(operation === undefined ? { cause } : { cause, operation }) })
      )
    // the server terminated the backend (SQLSTATE 57P01), a connection exception (08xxx), a socket error
    expect(unknown(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" })))
      .toBe(true)
    expect(unknown(Object.assign(new Error("connection failure"), { code: "08006" }))).toBe(true)
    expect(unknown(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true)
    // sql-pg 4's own reports of a socket that failed or closed under a statement
    expect(connection(new Error("Connection closed"), "query")).toBe(true)
    expect(connection(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }), "query")).toBe(true)
    // not lost: a statement's own errors, a client closed on purpose, a server that refused the connection
    expect(unknown(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false)
    expect(
      connectionLost(new SqlError({ reason: new UniqueViolation({ cause: new Error("dup"), constraint: "pk" }) }))
    ).toBe(false)
    expect(unknown(Object.assign(new Error("canceling statement due to lock timeout"), { code: "55P03" }))).toBe(false)
    expect(connection(new Error("Connection is closed"), "query")).toBe(false)
    expect(connection(new Error("connect ECONNREFUSED"), "connect")).toBe(false)
    expect(connectionLost(new Error("Connection terminated unexpectedly"))).toBe(false)
  })
})
