/**
 * `IdempotencyStore/Sql` on PostgreSQL (`@effect/sql-pg` 4) when the server terminates a connection in the middle
 * of a statement (`pg_terminate_backend`, as a failover or an administrator does): the statement is tried again
 * on another connection, so a completion is not lost to one broken connection — lost, it would leave its handled
 * key in progress, and a client's retry would run the handler again once the lease ran out. How each edition
 * recognises a lost connection (`connectionLost`: its PostgreSQL client's errors differ) is tested in its own
 * sqlConnectionLost test.
 *
 * To hit a statement in flight every time, another transaction locks the table, the store's statement
 * queues behind the lock, and its backend — found in `pg_stat_activity` waiting on that lock — is terminated.
 */
import {
  available,
  describePg,
  dropPgTables,
  eventually,
  fork,
  freshName,
  PgLive,
  scopedLive,
  SqlClient
} from "#edition"
import { afterAll, expect } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import type { IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"

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
    const holder = yield* fork(
      sql.withTransaction(
        Effect.andThen(
          sql`LOCK TABLE ${sql(table)} IN SHARE ROW EXCLUSIVE MODE`,
          Effect.andThen(Deferred.succeed(locked, undefined), Deferred.await(unlock))
        )
      )
    )
    yield* Deferred.await(locked)
    const fiber = yield* fork(Effect.exit(operation))
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
  scopedLive(
    "complete: retried on another connection, the response is stored and replayed",
    () =>
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
      }).pipe(Effect.provide(PgLive))
  )

  scopedLive(
    "claim: retried on another connection, it claims once; the next claim is InProgress",
    () =>
      Effect.gen(function*() {
        const table = freshTable()
        const store = yield* IdempotencyStoreSql.make({ table, cleanup: false, timeout: "20 seconds" })
        const { exit, terminated } = yield* terminatedMidStatement(table, "INSERT INTO", store.claim(request("k2")))
        expect(terminated).toBe(1)
        expect(Exit.isSuccess(exit) && exit.value._tag).toBe("Claimed")
        expect((yield* store.claim(request("k2")))._tag).toBe("InProgress")
      }).pipe(Effect.provide(PgLive))
  )
})
