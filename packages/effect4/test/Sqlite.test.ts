/**
 * `effect-resilience/Sqlite`, the `effect/sql` client over `node:sqlite`: the statement forms the library's SQL
 * backends send, transactions, lock waits between connections, and its failures — every one a typed `SqlError`.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Stream } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Sqlite from "../src/Sqlite.js"

const dir = mkdtempSync(join(tmpdir(), "effect-resilience-sqlite-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshFile = () => join(dir, `db-${++files}.sqlite`)

const reasonOf = (exit: Exit.Exit<unknown, unknown>) => {
  const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : undefined
  return error?._tag === "Some" ? (error.value as { readonly reason?: { readonly _tag: string } }).reason?._tag : "none"
}

describe("Sqlite", () => {
  it.effect("runs statements with and without RETURNING, raw, values and unsafe", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, data BLOB)`
      const inserted = yield* sql<{ readonly id: number }>`
        INSERT INTO t (name, data) VALUES (${"a"}, ${new Uint8Array([0, 255])}) RETURNING id`
      expect(inserted).toEqual([{ id: 1 }])
      expect(yield* sql`INSERT INTO t (name) VALUES (${"b"})`).toEqual([])
      expect(yield* sql`UPDATE t SET name = 'c' WHERE id = ${2}`.raw).toMatchObject({ changes: 1 })
      expect(yield* sql`SELECT id, name FROM t ORDER BY id`.values).toEqual([[1, "a"], [2, "c"]])
      const [row] = yield* sql.unsafe<{ readonly data: Uint8Array }>("SELECT data FROM t WHERE id = ?", [1])
      expect([...row!.data]).toEqual([0, 255])
      expect(yield* sql`SELECT name FROM t WHERE ${sql.in("id", [1, 2])} ORDER BY id`).toEqual([
        { name: "a" },
        { name: "c" }
      ])
    }).pipe(Effect.provide(Sqlite.layer({ filename: ":memory:" }))))

  it.effect("transactions commit, roll back on failure, and nest with savepoints", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (n INTEGER)`
      const count = Effect.map(sql<{ readonly c: number }>`SELECT COUNT(*) AS c FROM t`, (rows) => rows[0]!.c)
      yield* sql.withTransaction(sql`INSERT INTO t VALUES (1)`)
      const failed = yield* Effect.exit(
        sql.withTransaction(Effect.andThen(sql`INSERT INTO t VALUES (2)`, Effect.fail("boom")))
      )
      expect(Exit.isFailure(failed)).toBe(true)
      expect(yield* count).toBe(1)
      yield* sql.withTransaction(
        Effect.andThen(
          sql`INSERT INTO t VALUES (3)`,
          Effect.exit(sql.withTransaction(Effect.andThen(sql`INSERT INTO t VALUES (4)`, Effect.fail("inner"))))
        )
      )
      expect(yield* sql<{ readonly n: number }>`SELECT n FROM t ORDER BY n`).toEqual([{ n: 1 }, { n: 3 }])
    }).pipe(Effect.provide(Sqlite.layer({ filename: ":memory:" }))))

  it.effect("safe integers: integers beyond 2^53 as bigint when asked, a SqlError otherwise", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const big = sql<{ readonly v: unknown }>`SELECT 9007199254740993 AS v`
      expect((yield* big.pipe(Effect.provideService(SqlClient.SafeIntegers, true)))[0]!.v).toBe(9007199254740993n)
      // without: node:sqlite refuses to round it, and that is a typed error, not a wrong number
      expect(reasonOf(yield* Effect.exit(big))).toBe("UnknownError")
      expect((yield* sql<{ readonly v: unknown }>`SELECT 9007199254740991 AS v`)[0]!.v).toBe(9007199254740991)
    }).pipe(Effect.provide(Sqlite.layer({ filename: ":memory:" }))))

  it.effect("a write waits busyTimeout for another connection's lock, then fails with LockTimeoutError", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const holder = yield* Sqlite.make({ filename })
      const waiter = yield* Sqlite.make({ filename, busyTimeout: "50 millis" })
      yield* holder`CREATE TABLE t (n INTEGER)`
      const exit = yield* holder.withTransaction(
        Effect.andThen(holder`INSERT INTO t VALUES (1)`, Effect.exit(waiter`INSERT INTO t VALUES (2)`))
      )
      expect(reasonOf(exit)).toBe("LockTimeoutError")
      // the lock is gone with the transaction: the waiter writes now, and reads what the holder committed
      yield* waiter`INSERT INTO t VALUES (2)`
      expect(yield* waiter<{ readonly n: number }>`SELECT n FROM t ORDER BY n`).toEqual([{ n: 1 }, { n: 2 }])
      expect(yield* waiter`PRAGMA journal_mode`).toEqual([{ journal_mode: "wal" }])
    }))

  it.effect("failures are typed SqlErrors: a bad statement, a file that cannot be opened, a read-only file", () =>
    Effect.gen(function*() {
      const sql = yield* Sqlite.make({ filename: ":memory:" })
      expect(reasonOf(yield* Effect.exit(sql`SELEC 1`))).toBe("UnknownError") // SQLITE_ERROR, as Effect classifies it
      yield* sql`CREATE TABLE u (k TEXT UNIQUE)`
      yield* sql`INSERT INTO u VALUES ('x')`
      expect(reasonOf(yield* Effect.exit(sql`INSERT INTO u VALUES ('x')`))).toBe("UniqueViolation")
      const missing = yield* Effect.exit(Sqlite.make({ filename: join(dir, "no", "such", "dir.db") }))
      expect(reasonOf(missing)).toBe("ConnectionError")
      const filename = freshFile()
      yield* Effect.flatMap(Sqlite.make({ filename }), (rw) => rw`CREATE TABLE t (n INTEGER)`)
      const ro = yield* Sqlite.make({ filename, readonly: true })
      expect(yield* ro`SELECT COUNT(*) AS c FROM t`).toEqual([{ c: 0 }])
      expect(Exit.isFailure(yield* Effect.exit(ro`INSERT INTO t VALUES (1)`))).toBe(true)
      // streams are not supported, loudly
      const streamed = yield* Effect.exit(Stream.runCollect(sql`SELECT 1`.stream))
      expect(Exit.isFailure(streamed) && Cause.hasDies(streamed.cause)).toBe(true)
    }))

  it.effect("closed with its scope: a statement afterwards fails, it does not crash", () =>
    Effect.gen(function*() {
      const sql = yield* Layer.build(Sqlite.layer({ filename: freshFile() })).pipe(
        Effect.scoped,
        Effect.map((context) => context.mapUnsafe.get(SqlClient.SqlClient.key) as SqlClient.SqlClient)
      )
      const exit = yield* Effect.exit(sql`SELECT 1`)
      expect(Exit.isFailure(exit) && Cause.hasFails(exit.cause)).toBe(true)
    }))

  it("rejects invalid options where the client is made", () => {
    expect(() => Sqlite.make({ filename: "" })).toThrow(Cause.IllegalArgumentError)
    expect(() => Sqlite.layer({ filename: "x.db", busyTimeout: -1 })).toThrow(/busyTimeout/)
    expect(() => Sqlite.layer({ filename: "x.db", prepareCacheSize: 0 })).toThrow(/prepareCacheSize/)
  })
})
