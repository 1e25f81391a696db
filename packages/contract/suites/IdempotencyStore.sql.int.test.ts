/**
 * `IdempotencyStore/Sql` against SQLite (a temp file, through the edition's SQLite client: Effect 4's
 * `effect-resilience/Sqlite`, Effect 3's `@effect/sql-sqlite-node`) and PostgreSQL (`DATABASE_URL`, default
 * `postgres://postgres@127.0.0.1:5432/test`, through `@effect/sql-pg`): the shared store contract, then what only
 * SQL has — the migration, bounded cleanup, column-name transforms, several connections to one file, and failures,
 * and the middleware over each (served in memory, ./support/idempotencyServer.ts).
 *
 * Each run uses its own table names (pid + time), so parallel runs against one database do not collide;
 * the tables are dropped afterwards. In CI (`CI=true`) a missing PostgreSQL fails the run instead of skipping.
 */
import {
  available,
  clientOver,
  connectionTerminated,
  DATABASE_URL,
  describePg,
  dropPgTables,
  type DurationInput,
  durationOf,
  edition,
  errorOf,
  eventually,
  failureOf,
  fork,
  freshName,
  HttpServerRequest,
  HttpServerResponse,
  pgLayer,
  PgLive,
  pgMake,
  pollUnsafe,
  provideScope,
  scoped,
  SqlClient,
  type SqlConnection,
  sqliteLayer,
  sqliteMake,
  TestClock
} from "#edition"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { type ClientScope, IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { idempotencyStoreSuite } from "./idempotencyStoreSuite.js"
import { serve } from "./support/idempotencyServer.js"

const freshTable = () => freshName("idem")

const dir = mkdtempSync(join(tmpdir(), `effect-resilience-${edition}-sql-`))
const sqliteFile = join(dir, "idempotency.db")
const SqliteLive = sqliteLayer({ filename: sqliteFile })

const pgTables: Array<string> = []
/** A fresh PostgreSQL table, remembered so it is dropped after the run. */
const freshPgTable = () => {
  const table = freshTable()
  pgTables.push(table)
  return table
}

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  if (!available.postgres || pgTables.length === 0) return
  await Effect.runPromise(dropPgTables(pgTables).pipe(Effect.provide(PgLive)))
})

idempotencyStoreSuite(
  "SQLite",
  IdempotencyStoreSql.layer({ table: freshTable() }).pipe(Layer.provide(SqliteLive))
)

describePg("PostgreSQL", () => {
  idempotencyStoreSuite("PostgreSQL", IdempotencyStoreSql.layer({ table: freshPgTable() }).pipe(Layer.provide(PgLive)))
})

const claimRequest = (key: string, ttl: DurationInput = "1 hour"): IdempotencyStore.ClaimRequest => ({
  scope: "s",
  key,
  fingerprint: "f",
  ttl: durationOf(ttl),
  lease: Duration.seconds(60)
})

const countRows = (table: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly n: unknown }>`SELECT COUNT(*) AS n FROM ${sql(table)}`
    return Number(rows[0]?.n)
  })

/** A store whose database goes away: the client's scope is closed after the store was built. */
const storeWithClosedClient = (client: Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope>, table: string) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const store = yield* client.pipe(
      Effect.flatMap((sql) =>
        IdempotencyStoreSql.make({ table, cleanup: false }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      ),
      provideScope(scope)
    )
    yield* Scope.close(scope, Exit.void)
    return store
  })

/** Every operation fails with an IdempotencyStoreError naming it; nothing dies, nothing is interrupted. */
const expectStoreErrors = (store: IdempotencyStore.Store) =>
  Effect.gen(function*() {
    const ref = { scope: "s", key: "k", token: "t" }
    const response = { status: 201, headers: {}, body: new Uint8Array([1]) }
    const attempts = [
      ["claim", store.claim(claimRequest("k"))],
      ["complete", store.complete(ref, response, Duration.hours(1))],
      ["renew", store.renew(ref, Duration.seconds(1))],
      ["release", store.release(ref)]
    ] as const
    for (const [operation, attempt] of attempts) {
      const exit = yield* Effect.exit(attempt as Effect.Effect<unknown, IdempotencyStore.IdempotencyStoreError>)
      expect(failureOf(exit)).toBeDefined()
      const error = yield* Effect.flip(attempt as Effect.Effect<unknown, IdempotencyStore.IdempotencyStoreError>)
      expect(error._tag).toBe("IdempotencyStoreError")
      expect(error.operation).toBe(operation)
    }
  })

const sqliteClosed = (table: string) =>
  storeWithClosedClient(sqliteMake({ filename: join(dir, `closed-${table}.db`) }), table)

describe("IdempotencyStore/Sql (SQLite)", () => {
  scoped("the migration is idempotent: building the store twice on one table works", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const first = yield* IdempotencyStoreSql.make({ table })
      const second = yield* IdempotencyStoreSql.make({ table })
      expect(first.dialect).toBe("sqlite")
      expect((yield* first.claim(claimRequest("k")))._tag).toBe("Claimed")
      expect((yield* second.claim(claimRequest("k")))._tag).toBe("InProgress")
      const sql = yield* SqlClient.SqlClient
      for (const statement of IdempotencyStoreSql.migrations("sqlite", table)) yield* sql.unsafe(statement)
      expect(yield* countRows(table)).toBe(1)
    }).pipe(Effect.provide(SqliteLive)))

  scoped("migrate: false leaves the schema to the application", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const store = yield* IdempotencyStoreSql.make({ table, migrate: false })
      const sql = yield* SqlClient.SqlClient
      const exists = sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name = ${table}`
      expect(yield* exists).toHaveLength(0)
      // before the table exists a claim fails (typed), and works once the application made it; not claiming
      // before in Effect 3, whose SQLite client (@effect/sql-sqlite-node) caches a failed prepare for minutes
      if (edition === "effect4") {
        expect((yield* Effect.flip(store.claim(claimRequest("k"))))._tag).toBe("IdempotencyStoreError")
      }
      for (const statement of IdempotencyStoreSql.migrations("sqlite", table)) yield* sql.unsafe(statement)
      expect(yield* exists).toHaveLength(1)
      expect((yield* store.claim(claimRequest("k")))._tag).toBe("Claimed")
    }).pipe(Effect.provide(SqliteLive)))

  scoped("deleteExpired removes expired rows in bounded batches and keeps live ones", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const store = yield* IdempotencyStoreSql.make({ table, cleanup: false, cleanupBatch: 3 })
      for (let i = 0; i < 10; i++) yield* store.claim(claimRequest(`short-${i}`, "1 second"))
      const live = yield* store.claim(claimRequest("long"))
      yield* TestClock.adjust("2 seconds")
      expect(yield* store.deleteExpired).toBe(10)
      expect(yield* countRows(table)).toBe(1)
      expect(yield* store.deleteExpired).toBe(0)
      expect(live._tag).toBe("Claimed")
      expect((yield* store.claim(claimRequest("long")))._tag).toBe("InProgress")
    }).pipe(Effect.provide(SqliteLive)))

  scoped(
    "a corrupt record fails the claim with IdempotencyStoreError, for any caller, not with a defect",
    () =>
      Effect.gen(function*() {
        const table = freshTable()
        const store = yield* IdempotencyStoreSql.make({ table })
        expect((yield* store.claim(claimRequest("k")))._tag).toBe("Claimed")
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE ${sql(table)} SET state = 'not a number'`
        // the middleware claims uninterruptibly
        for (const claim of [store.claim(claimRequest("k")), Effect.uninterruptible(store.claim(claimRequest("k")))]) {
          expect(yield* Effect.flip(claim)).toMatchObject({
            _tag: "IdempotencyStoreError",
            operation: "claim",
            cause: { message: "corrupt record: not a number" }
          })
        }
      }).pipe(Effect.provide(SqliteLive))
  )

  scoped(
    "expired rows are deleted by the background fiber each interval, not by requests",
    () =>
      Effect.gen(function*() {
        const table = freshTable()
        const store = yield* IdempotencyStoreSql.make({ table, cleanupInterval: "1 minute", cleanupBatch: 2 })
        for (let i = 0; i < 5; i++) yield* store.claim(claimRequest(`short-${i}`, "1 second"))
        yield* TestClock.adjust("2 seconds")
        yield* store.claim(claimRequest("other"))
        expect(yield* countRows(table)).toBe(6)
        yield* TestClock.adjust("1 minute")
        expect(yield* countRows(table)).toBe(1)
      }).pipe(Effect.provide(SqliteLive))
  )

  scoped("works with a client that transforms column names", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStoreSql.make({ table: freshTable() })
      const claim = yield* store.claim(claimRequest("k"))
      if (claim._tag !== "Claimed") return expect.fail(claim._tag)
      expect((yield* store.claim(claimRequest("k")))._tag).toBe("InProgress")
      const ref = { scope: "s", key: "k", token: claim.token }
      const response = { status: 201, headers: { location: "/x" }, body: new Uint8Array([7]) }
      expect(yield* store.complete(ref, response, Duration.hours(1))).toBe(true)
      const replay = yield* store.claim(claimRequest("k"))
      expect(replay._tag === "Completed" && replay.response.headers).toEqual({ location: "/x" })
    }).pipe(Effect.provide(sqliteLayer({
      filename: sqliteFile,
      transformResultNames: (s) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
      transformQueryNames: (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
    }))))

  scoped("two connections to one file: of 100 concurrent claims exactly one is Claimed", () =>
    Effect.gen(function*() {
      const table = freshTable()
      const connect = sqliteMake({ filename: sqliteFile }).pipe(
        Effect.flatMap((sql) =>
          IdempotencyStoreSql.make({ table, cleanup: false }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        )
      )
      const a = yield* connect
      const b = yield* connect
      const results = yield* Effect.all(
        Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).claim(claimRequest("contended"))),
        { concurrency: "unbounded" }
      )
      expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
    }))

  scoped(
    "a claim whose later attempt committed but lost its answer claims once (one token for all attempts)",
    () =>
      Effect.gen(function*() {
        // the scenario, on one SQLite connection behind a wrapper that injects it: the key is in progress for
        // another request; the claim's first upsert does not take the row, the row goes away (released) before
        // the read, so the claim tries again; that second upsert commits, and its connection is lost before
        // the answer arrives. The retry on "another connection" must find its own claim.
        const table = freshTable()
        const real = yield* sqliteMake({ filename: sqliteFile })
        const connection = yield* real.reserve
        let inserts = 0
        let selects = 0
        // what the PostgreSQL client reports for a backend the server terminated
        const lost = connectionTerminated
        const faulty: SqlConnection = {
          ...connection,
          execute: (sql, params, transformRows) => {
            const statement = sql.trimStart()
            if (statement.startsWith("INSERT INTO")) {
              inserts++
              const run = connection.execute(sql, params, transformRows)
              return inserts === 3 ? Effect.andThen(run, Effect.fail(lost())) : run
            }
            if (statement.startsWith("SELECT token") && ++selects === 1) {
              return Effect.andThen(
                connection.execute(`DELETE FROM "${table}"`, [], undefined),
                connection.execute(sql, params, transformRows)
              )
            }
            return connection.execute(sql, params, transformRows)
          }
        }
        const sql = yield* clientOver(faulty)
        const store = yield* IdempotencyStoreSql.make({ table, cleanup: false }).pipe(
          Effect.provideService(SqlClient.SqlClient, sql)
        )
        expect((yield* store.claim(claimRequest("k")))._tag).toBe("Claimed") // insert 1: another request's
        const fiber = yield* fork(store.claim(claimRequest("k")))
        yield* TestClock.adjust("1 second") // the pause before the retry of a lost connection
        const claimed = yield* Fiber.join(fiber)
        expect(inserts).toBe(4) // attempt 1, attempt 2 (committed, answer lost), the retry's attempt 1
        expect(claimed._tag).toBe("Claimed")
        if (claimed._tag !== "Claimed") return
        // the token returned is the one in the row: the claim's owner can complete it
        const ref = { scope: "s", key: "k", token: claimed.token }
        expect(yield* store.complete(ref, { status: 201, headers: {}, body: new Uint8Array() }, Duration.hours(1)))
          .toBe(true)
        expect((yield* store.claim(claimRequest("k")))._tag).toBe("Completed")
      })
  )

  scoped(
    "a closed database: every operation fails with IdempotencyStoreError, never a defect",
    () => Effect.flatMap(sqliteClosed(freshTable()), expectStoreErrors)
  )

  it("rejects a bad table name or cleanup setting when the layer is made", () => {
    expect(() => IdempotencyStoreSql.layer({ table: "Orders" })).toThrow(/table/)
    expect(() => IdempotencyStoreSql.layer({ table: "x; DROP TABLE y" })).toThrow(/table/)
    expect(() => IdempotencyStoreSql.layer({ table: "t".repeat(60) })).toThrow(/table/)
    expect(() => IdempotencyStoreSql.layer({ cleanupBatch: 0 })).toThrow(/cleanupBatch/)
    expect(() => IdempotencyStoreSql.layer({ cleanupInterval: 0 })).toThrow(/cleanupInterval/)
    expect(IdempotencyStoreSql.migrations("pg")[0]).toContain(
      "CREATE TABLE IF NOT EXISTS effect_resilience_idempotency"
    )
    expect(IdempotencyStoreSql.migrations("pg")[0]).toContain("BYTEA")
    expect(IdempotencyStoreSql.migrations("sqlite", "my_keys")[1]).toContain("my_keys_expires_at")
  })
})

/** An orders endpoint that counts how often its handler really ran; `serveOrders` serves it behind `idempotent`. */
const makeOrders = () => {
  let runs = 0
  const handler = Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) =>
      Effect.flatMap(Effect.orDie(request.json), (body) => {
        const n = ++runs
        return HttpServerResponse.json({ id: n, ...(body as object) }, {
          status: 201,
          headers: { location: `/orders/${n}` }
        }).pipe(Effect.orDie)
      })
  )
  const serveOrders = (idempotent: ClientScope.Middleware) =>
    Effect.map(
      serve(handler.pipe(idempotent)),
      (send) => (key: string, body: unknown = {}) => send({ path: "/orders", key, body })
    )
  return { serveOrders, runs: () => runs }
}

describe("IdempotencyMiddleware over SQL", () => {
  scoped("SQLite end to end: one run, replays, concurrent duplicates", () =>
    Effect.gen(function*() {
      const orders = makeOrders()
      const post = yield* orders.serveOrders(yield* IdempotencyMiddleware.make())
      const first = yield* post("k-1", { sku: "BOOK-1" })
      const again = yield* post("k-1", { sku: "BOOK-1" })
      expect(first.status).toBe(201)
      expect(again.body).toBe(first.body)
      expect(again.headers["location"]).toBe("/orders/1")
      expect(again.headers["idempotent-replayed"]).toBe("true")
      expect((yield* post("k-1", { sku: "OTHER" })).status).toBe(422)
      const replies = yield* Effect.all(
        Array.from({ length: 30 }, () => post("dup", { sku: "A" })),
        { concurrency: "unbounded" }
      )
      for (const reply of replies) expect([201, 409]).toContain(reply.status)
      expect(orders.runs()).toBe(2)
    }).pipe(Effect.provide(IdempotencyStoreSql.layer({ table: freshTable() }).pipe(Layer.provide(SqliteLive)))))

  scoped(
    "a SQLite database that went away: 503 with Retry-After, the handler does not run",
    () =>
      Effect.gen(function*() {
        const store = yield* sqliteClosed(freshTable())
        const orders = makeOrders()
        const idempotent = yield* IdempotencyMiddleware.make().pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, store)
        )
        const reply = yield* (yield* orders.serveOrders(idempotent))("down")
        expect(reply.status).toBe(503)
        expect(reply.headers["retry-after"]).toBe("1")
        expect(orders.runs()).toBe(0)
      })
  )
})

describePg("IdempotencyStore/Sql (PostgreSQL)", () => {
  // the middleware claims uninterruptibly: the timeout must hold for such a caller too
  for (const [suffix, uninterruptible] of [["", false], [" (an uninterruptible caller)", true]] as const) {
    scoped(
      `a locked table: the claim fails with IdempotencyStoreError after the timeout, it does not hang${suffix}`,
      () =>
        Effect.gen(function*() {
          const table = freshPgTable()
          const store = yield* IdempotencyStoreSql.make({ table, timeout: "2 seconds" })
          const sql = yield* SqlClient.SqlClient
          const locked = yield* Deferred.make<void>()
          const unlock = yield* Deferred.make<void>()
          // another connection holds the table locked in a transaction until the claim has given up
          const holder = yield* fork(
            sql.withTransaction(
              Effect.andThen(
                sql`LOCK TABLE ${sql(table)} IN ACCESS EXCLUSIVE MODE`,
                Effect.andThen(Deferred.succeed(locked, undefined), Deferred.await(unlock))
              )
            )
          )
          yield* Deferred.await(locked)
          const claiming = store.claim(claimRequest("locked"))
          const claim = yield* fork(Effect.exit(uninterruptible ? Effect.uninterruptible(claiming) : claiming))
          // the claim is waiting on the lock; move the test clock until its timeout fires (real time between)
          const exit = yield* eventually(
            Effect.andThen(TestClock.adjust("500 millis"), Effect.sync(() => pollUnsafe(claim) !== undefined))
          ).pipe(
            Effect.andThen(Fiber.join(claim)),
            // the lock goes however this ends: a test failing here must not leave the statement queued behind it
            Effect.ensuring(Deferred.succeed(unlock, undefined))
          )
          yield* Fiber.join(holder)
          expect(errorOf(exit)).toMatchObject({
            _tag: "Some",
            value: { _tag: "IdempotencyStoreError", operation: "claim" }
          })
        }).pipe(Effect.provide(PgLive))
    )
  }

  scoped("the migration is idempotent, even from several processes' layers at once", () =>
    Effect.gen(function*() {
      const table = freshPgTable()
      const stores = yield* Effect.all(
        Array.from({ length: 5 }, () => IdempotencyStoreSql.make({ table })),
        { concurrency: "unbounded" }
      )
      expect(stores[0]?.dialect).toBe("pg")
      yield* IdempotencyStoreSql.make({ table })
      expect((yield* stores[0]!.claim(claimRequest("k")))._tag).toBe("Claimed")
      expect(yield* countRows(table)).toBe(1)
    }).pipe(Effect.provide(PgLive)))

  scoped("deleteExpired removes expired rows in bounded batches and keeps live ones", () =>
    Effect.gen(function*() {
      const table = freshPgTable()
      const store = yield* IdempotencyStoreSql.make({ table, cleanup: false, cleanupBatch: 3 })
      for (let i = 0; i < 10; i++) yield* store.claim(claimRequest(`short-${i}`, "1 second"))
      yield* store.claim(claimRequest("long"))
      yield* TestClock.adjust("2 seconds")
      expect(yield* store.deleteExpired).toBe(10)
      expect(yield* countRows(table)).toBe(1)
      expect((yield* store.claim(claimRequest("long")))._tag).toBe("InProgress")
    }).pipe(Effect.provide(PgLive)))

  scoped(
    "end to end through the middleware, then the pool is closed: 503 and the handler does not run",
    () =>
      Effect.gen(function*() {
        const table = freshPgTable()
        const orders = makeOrders()
        const live = yield* IdempotencyStoreSql.make({ table })
        let current: IdempotencyStore.Store = live
        // the middleware holds this store: swap what it delegates to for one whose pool was closed
        const swappable: IdempotencyStore.Store = {
          claim: (request) => current.claim(request),
          complete: (ref, response, ttl) => current.complete(ref, response, ttl),
          renew: (ref, lease) => current.renew(ref, lease),
          release: (ref) => current.release(ref)
        }
        const idempotent = yield* IdempotencyMiddleware.make().pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, swappable)
        )
        const post = yield* orders.serveOrders(idempotent)
        yield* post("pg", { n: 1 })
        const replay = yield* post("pg", { n: 1 })
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        const closed = yield* storeWithClosedClient(
          pgMake(DATABASE_URL),
          table
        )
        yield* expectStoreErrors(closed)
        current = closed
        const down = yield* post("pg-down")
        expect(down.status).toBe(503)
        expect(down.headers["retry-after"]).toBe("1")
        expect(orders.runs()).toBe(1)
      }).pipe(Effect.provide(PgLive))
  )

  scoped("an unreachable server fails the layer with a SqlError, not a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Effect.scoped(Layer.build(
          IdempotencyStoreSql.layer({ table: freshTable() }).pipe(
            Layer.provide(pgLayer({ host: "127.0.0.1", port: 1, database: "test", username: "postgres" }))
          )
        ))
      )
      expect(failureOf(exit)).toMatchObject({ _tag: "SqlError" })
    }))
})
