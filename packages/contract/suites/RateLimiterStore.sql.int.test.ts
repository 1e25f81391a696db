/**
 * `RateLimiterStore/Sql` against SQLite (a temp file, the edition's client) and PostgreSQL (`DATABASE_URL`, the
 * edition's `@effect/sql-pg`): the shared algorithm suite, decision for decision equality with the memory store,
 * then what only SQL has — the rows it writes, their cleanup, and database failures. Tables are per run and
 * dropped afterwards.
 */
import {
  describePg,
  effectProp,
  eventually,
  fc,
  fork,
  queueFreshName,
  queueLoggedLines,
  queuePgClient as PgLive,
  queueQuietLogger as quiet,
  queueSqlite,
  SqlClientModule as SqlClient,
  TestClock
} from "#edition"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer } from "effect"
import { RateLimiter, RateLimiterStore } from "effect-resilience"
import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgTables } from "./queue/pgTables.js"
import { rateLimiterSuite } from "./rateLimiterSuite.js"
import { fractionalSlidingWindow } from "./slidingWindow.js"

const freshTable = () => queueFreshName("rl")

const dir = mkdtempSync(join(tmpdir(), "effect-resilience-rl-sql-"))
const SqliteLive = queueSqlite(join(dir, "rate-limits.db"))

const pg = pgTables()
const freshPgTable = () => pg.fresh("rl")

afterAll(() => rmSync(dir, { recursive: true, force: true }))

let counter = 0
const fresh = (what: string) => `${what}-${++counter}`

const withStore = <A, E>(
  layer: Layer.Layer<RateLimiterStore.RateLimiterStore>,
  f: (store: RateLimiterStore.Store) => Effect.Effect<A, E>
) => Effect.flatMap(RateLimiterStore.RateLimiterStore, f).pipe(Effect.provide(layer), Effect.scoped)

const countRows = (table: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.map(sql<{ readonly n: unknown }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0]!.n))
  )

const logged = queueLoggedLines

interface Dialect {
  readonly name: string
  readonly client: Layer.Layer<SqlClient.SqlClient, unknown>
  readonly table: () => string
  readonly describe: (name: string, body: () => void) => void
}

const dialects: ReadonlyArray<Dialect> = [
  { name: "SQLite", client: SqliteLive, table: freshTable, describe },
  { name: "PostgreSQL", client: PgLive, table: freshPgTable, describe: describePg }
]

for (const dialect of dialects) {
  dialect.describe(`RateLimiterStore/Sql on ${dialect.name}`, () => {
    const table = dialect.table()
    const suiteLayer = RateLimiterStoreSql.layer({ table }).pipe(Layer.provide(dialect.client), Layer.orDie)

    rateLimiterSuite(dialect.name, suiteLayer)
    fractionalSlidingWindow(dialect.name, suiteLayer)

    effectProp(
      "decides exactly as the memory store, call for call",
      {
        algorithm: fc.constantFrom("tokenBucket" as const, "fixedWindow" as const, "slidingWindow" as const),
        limit: fc.integer({ min: 1, max: 10 }),
        // refill rates and windows with awkward fractions: 1000 / rate is rarely exact
        rate: fc.double({ min: 0.01, max: 5000, noNaN: true }),
        window: fc.oneof(fc.integer({ min: 1, max: 5000 }), fc.double({ min: 0.1, max: 5000, noNaN: true })),
        start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
        steps: fc.array(
          fc.record({
            delay: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3000 })),
            cost: fc.integer({ min: 1, max: 12 })
          }),
          { minLength: 1, maxLength: 30 }
        )
      },
      ({ algorithm, limit, rate, start, steps, window }) =>
        withStore(suiteLayer, (sql) =>
          Effect.gen(function*() {
            const memory = RateLimiterStore.unsafeMakeMemory()
            const name = fresh("diff")
            let now = start
            for (const { cost, delay } of steps) {
              now += delay
              const expected = algorithm === "tokenBucket"
                ? memory.sync.tokenBucket("k", cost, { name, capacity: limit, refillPerSecond: rate }, now)
                : memory.sync[algorithm]("k", cost, { name, limit, windowMillis: window }, now)
              const actual = algorithm === "tokenBucket"
                ? yield* sql.tokenBucket("k", cost, { name, capacity: limit, refillPerSecond: rate }, now)
                : yield* sql[algorithm]("k", cost, { name, limit, windowMillis: window }, now)
              expect(actual).toEqual(expected)
            }
          })),
      { fastCheck: { numRuns: 100 }, timeout: 120_000 }
    )

    it.effect("limiters and keys are apart, whatever characters their names hold", () =>
      withStore(suiteLayer, (store) =>
        Effect.gen(function*() {
          const name = fresh("a:b")
          const params = { name, limit: 1, windowMillis: 60_000 }
          expect((yield* store.fixedWindow("c", 1, params, 0)).allowed).toBe(true)
          expect((yield* store.fixedWindow("c", 1, { ...params, name: `${name}:c` }, 0)).allowed).toBe(true)
          expect((yield* store.fixedWindow("x'; DROP TABLE y; --", 1, params, 0)).allowed).toBe(true)
          // the same limiter name with another algorithm is another row
          expect((yield* store.slidingWindow("c", 1, params, 0)).allowed).toBe(true)
          expect((yield* store.fixedWindow("c", 1, params, 0)).allowed).toBe(false)
        })))

    it.effect("idle keys' rows are deleted by the sweep, an expiryMargin after they are fresh again", () =>
      Effect.gen(function*() {
        const own = dialect.table()
        const layer = RateLimiterStoreSql.layer({
          table: own,
          cleanupInterval: "10 seconds",
          expiryMargin: "5 seconds"
        })
          .pipe(Layer.provide(dialect.client), Layer.orDie)
        yield* Effect.gen(function*() {
          const store = yield* RateLimiterStore.RateLimiterStore
          const name = fresh("sweep")
          // full again 2 s after now: deleted by the first sweep past 7 s
          yield* store.tokenBucket("a", 2, { name, capacity: 4, refillPerSecond: 1 }, 0)
          // a denial of a key never seen writes an expired fresh row
          expect((yield* store.tokenBucket("b", 5, { name, capacity: 4, refillPerSecond: 1 }, 0)).allowed).toBe(false)
          // a long window: still counted after every sweep of this test
          yield* store.fixedWindow("c", 1, { name, limit: 3, windowMillis: 3_600_000 }, 0)
          expect(yield* countRows(own)).toBe(3)
          yield* TestClock.adjust("10 seconds")
          // the sweep woke at 10 s; its statements run in real time
          yield* eventually(Effect.map(countRows(own), (n) => n === 1))
          expect((yield* store.fixedWindow("c", 1, { name, limit: 3, windowMillis: 3_600_000 }, 10_000)).remaining)
            .toBe(1)
        }).pipe(Effect.provide(layer), Effect.scoped)
      }).pipe(Effect.provide(dialect.client), Effect.orDie))

    it.effect("a database failure is an outage: denied by default with retryAfterOnError, logged once", () =>
      Effect.gen(function*() {
        const own = dialect.table()
        const messages: Array<string> = []
        const layer = RateLimiterStoreSql.layer({ table: own, retryAfterOnError: "3 seconds" })
          .pipe(Layer.provide(dialect.client), Layer.orDie)
        const decisions = yield* Effect.gen(function*() {
          const limiter = yield* RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1, name: fresh("down") })
          expect((yield* limiter.tryAcquire("k")).allowed).toBe(true)
          const sql = yield* SqlClient.SqlClient
          yield* sql`DROP TABLE ${sql(own)}`
          return [yield* limiter.tryAcquire("k"), yield* limiter.tryAcquire("k")]
        }).pipe(Effect.provide(Layer.mergeAll(layer, dialect.client)), Effect.provide(logged(messages)), Effect.scoped)
        for (const d of decisions) {
          expect(d.allowed).toBe(false)
          expect(d.limit).toBe(5)
          expect(Duration.toMillis(d.retryAfter)).toBe(3000)
          expect(d.outage).toBe(true)
        }
        expect(messages.filter((m) => m.includes("denying"))).toHaveLength(1)

        const allowing = RateLimiterStoreSql.layer({ table: own, onError: "allow", migrate: false })
          .pipe(Layer.provide(dialect.client), Layer.orDie)
        const open = yield* withStore(
          allowing,
          (store) => store.fixedWindow("k", 1, { name: fresh("open"), limit: 1, windowMillis: 1000 }, 0)
        )
        expect(open).toMatchObject({ allowed: true, outage: true })
      }).pipe(Effect.provide(quiet)))
  })
}

describePg("RateLimiterStore/Sql on PostgreSQL, under a lock", () => {
  it.live("a decision the database does not answer within the timeout is an outage, not a hang", () =>
    Effect.gen(function*() {
      const table = freshPgTable()
      const layer = RateLimiterStoreSql.layer({ table, timeout: "300 millis" }).pipe(Layer.provide(PgLive), Layer.orDie)
      const decision = yield* Effect.gen(function*() {
        const store = yield* RateLimiterStore.RateLimiterStore
        const sql = yield* SqlClient.SqlClient
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        // another connection holds the table locked until the decision has been answered
        const holder = yield* fork(sql.withTransaction(
          sql`LOCK TABLE ${sql(table)} IN ACCESS EXCLUSIVE MODE`.pipe(
            Effect.andThen(Deferred.succeed(locked, undefined)),
            Effect.andThen(Deferred.await(release))
          )
        ))
        yield* Deferred.await(locked)
        const params = { name: fresh("locked"), capacity: 1, refillPerSecond: 1 }
        return yield* store.tokenBucket("k", 1, params, Date.now()).pipe(
          Effect.ensuring(Effect.andThen(Deferred.succeed(release, undefined), Fiber.await(holder)))
        )
      }).pipe(
        Effect.provide(Layer.merge(layer, PgLive)),
        Effect.provide(quiet),
        Effect.scoped
      )
      expect(decision).toMatchObject({ allowed: false, outage: true })
    }))
})

describe("RateLimiterStore/Sql options", () => {
  it("are checked when the layer is built", () => {
    expect(() => RateLimiterStoreSql.layer({ table: "Bad-Name" })).toThrow(/table/)
    expect(() => RateLimiterStoreSql.layer({ timeout: 0 })).toThrow(/timeout/)
    expect(() => RateLimiterStoreSql.layer({ onError: "maybe" as "allow" })).toThrow(/onError/)
    expect(() => RateLimiterStoreSql.layer({ cleanupBatch: 0 })).toThrow(/cleanupBatch/)
    expect(() => RateLimiterStoreSql.layer({ expiryMargin: -1 })).toThrow(/expiryMargin/)
    expect(RateLimiterStoreSql.schema("sqlite")[0]).toContain(
      "CREATE TABLE IF NOT EXISTS effect_resilience_rate_limits"
    )
    expect(RateLimiterStoreSql.schema("pg", "limits")[0]).toContain("CREATE UNLOGGED TABLE IF NOT EXISTS limits")
  })
})
