/**
 * The SQL store on PostgreSQL batches its writes (`src/internal/idempotencyStore/sqlBatch.ts`): claims and
 * completions that arrive together go out as one statement. Each operation must still answer as its own: these
 * tests count the statements behind a wrapper of one real connection, and break one of them.
 */
import {
  available,
  connectionTerminated,
  describePg,
  dropPgTables,
  eventually,
  failureOf,
  fork,
  freshName,
  pgClientOver,
  PgLive,
  pollUnsafe,
  SqlClient,
  type SqlConnection,
  type SqlFailure,
  TestClock
} from "#edition"
import { afterAll, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import type { IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"

const tables: Array<string> = []
const freshTable = () => {
  const table = freshName("idem_batch")
  tables.push(table)
  return table
}

afterAll(async () => {
  if (!available.postgres || tables.length === 0) return
  await Effect.runPromise(dropPgTables(tables).pipe(Effect.provide(PgLive)))
})

const claimRequest = (key: string): IdempotencyStore.ClaimRequest => ({
  scope: "s",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.seconds(60)
})
const response = (n: number, status = 201): IdempotencyStore.StoredResponse => ({
  status,
  headers: { "x-n": String(n) },
  body: new TextEncoder().encode(`order ${n}`)
})

type Fault = (statement: string, run: Effect.Effect<ReadonlyArray<any>, SqlFailure>) => Effect.Effect<
  ReadonlyArray<any>,
  SqlFailure
>

/** A store on one real PostgreSQL connection whose statements are counted by their first word, and may be broken. */
const storeOn = (fault: Fault = (_, run) => run) =>
  Effect.gen(function*() {
    const counts = { INSERT: 0, UPDATE: 0 } as Record<string, number>
    // the connection's own methods (a class's, on its prototype) for everything but `execute`
    const sql = yield* pgClientOver((connection): SqlConnection =>
      Object.assign(Object.create(connection), {
        execute: (sql: string, params: ReadonlyArray<unknown>, transformRows?: any) => {
          const word = sql.trimStart().split(/\s/, 1)[0]!
          counts[word] = (counts[word] ?? 0) + 1
          return fault(word, connection.execute(sql, params, transformRows))
        }
      })
    )
    const store = yield* IdempotencyStoreSql.make({ table: freshTable(), cleanup: false }).pipe(
      Effect.provideService(SqlClient.SqlClient, sql)
    )
    counts.INSERT = counts.UPDATE = 0 // the migration's
    return { store, counts }
  })

const claimAll = (store: IdempotencyStore.Store, keys: ReadonlyArray<string>) =>
  Effect.all(keys.map((key) => store.claim(claimRequest(key))), { concurrency: "unbounded" })

const tokenOf = (result: IdempotencyStore.ClaimResult) => {
  if (result._tag !== "Claimed") throw new Error(`not claimed: ${result._tag}`)
  return result.token
}

describePg("IdempotencyStore/Sql (PostgreSQL): batched writes", () => {
  it.effect("a burst of new keys is claimed and completed in a few statements, each answered as its own", () =>
    Effect.gen(function*() {
      const { counts, store } = yield* storeOn()
      const keys = Array.from({ length: 40 }, (_, i) => `k-${i}`)
      const tokens = (yield* claimAll(store, keys)).map(tokenOf)
      expect(new Set(tokens).size).toBe(40)
      expect(counts.INSERT).toBeGreaterThan(0)
      expect(counts.INSERT).toBeLessThan(10)
      const done = yield* Effect.all(
        keys.map((key, i) => store.complete({ scope: "s", key, token: tokens[i]! }, response(i), Duration.hours(1))),
        { concurrency: "unbounded" }
      )
      expect(done).toEqual(keys.map(() => true))
      expect(counts.UPDATE).toBeGreaterThan(0)
      expect(counts.UPDATE).toBeLessThan(10)
      // each key holds its own response
      const replays = yield* claimAll(store, keys)
      replays.forEach((replay, i) => {
        expect(replay._tag).toBe("Completed")
        if (replay._tag !== "Completed") return
        expect(replay.response.headers["x-n"]).toBe(String(i))
        expect(new TextDecoder().decode(replay.response.body)).toBe(`order ${i}`)
      })
      // a token that is not the row's completes nothing, in a batch as alone
      const [fresh] = yield* claimAll(store, ["fresh"])
      tokenOf(fresh!)
      const wrong = yield* Effect.all([
        store.complete({ scope: "s", key: "fresh", token: "not-mine" }, response(0), Duration.hours(1)),
        store.complete({ scope: "s", key: "k-0", token: tokens[0]! }, response(0), Duration.hours(1))
      ], { concurrency: "unbounded" })
      expect(wrong).toEqual([false, false])
      expect((yield* store.claim(claimRequest("fresh")))._tag).toBe("InProgress")
    }).pipe(Effect.scoped, Effect.provide(PgLive)))

  it.effect("the same key twice in one burst: one claim is Claimed, the other InProgress", () =>
    Effect.gen(function*() {
      const { store } = yield* storeOn()
      const results = yield* claimAll(store, ["a", "b", "a", "c", "a"])
      expect(results.map((r) => r._tag).sort()).toEqual(["Claimed", "Claimed", "Claimed", "InProgress", "InProgress"])
      expect(results[1]!._tag).toBe("Claimed")
      expect(results[3]!._tag).toBe("Claimed")
    }).pipe(Effect.scoped, Effect.provide(PgLive)))

  it.effect("one bad row fails only its own completion; the others of its batch are stored", () =>
    Effect.gen(function*() {
      const { counts, store } = yield* storeOn()
      const keys = ["x", "y", "z"]
      const tokens = (yield* claimAll(store, keys)).map(tokenOf)
      // a status beyond PostgreSQL's INTEGER fails the statement it is in
      const results = yield* Effect.all(
        keys.map((key, i) =>
          Effect.exit(
            store.complete(
              { scope: "s", key, token: tokens[i]! },
              response(i, i === 1 ? 2 ** 31 : 201),
              Duration.hours(1)
            )
          )
        ),
        { concurrency: "unbounded" }
      )
      expect(results.map((r) => r._tag)).toEqual(["Success", "Failure", "Success"])
      expect(failureOf(results[1]!)?.operation).toBe("complete")
      // the batch of three, then each alone
      expect(counts.UPDATE).toBe(4)
      expect((yield* store.claim(claimRequest("x")))._tag).toBe("Completed")
      expect((yield* store.claim(claimRequest("y")))._tag).toBe("InProgress")
      expect((yield* store.claim(claimRequest("z")))._tag).toBe("Completed")
    }).pipe(Effect.scoped, Effect.provide(PgLive)))

  it.effect("a batch that committed and lost its answer: every claim of it retries and finds itself Claimed", () =>
    Effect.gen(function*() {
      let inserts = 0
      // what the PostgreSQL client reports for a backend the server terminated
      const lost = connectionTerminated()
      const { store } = yield* storeOn((word, run) =>
        word === "INSERT" && ++inserts === 1 ? Effect.andThen(run, Effect.fail(lost)) : run
      )
      const keys = ["p", "q", "r", "s"]
      const fiber = yield* fork(claimAll(store, keys))
      // the pauses before the retries of a lost connection, in TestClock time, while the statements run in real
      // time: in small steps, well within the operations' timeout
      yield* eventually(
        Effect.andThen(TestClock.adjust("10 millis"), Effect.sync(() => pollUnsafe(fiber) !== undefined))
      )
      const tokens = (yield* Fiber.join(fiber)).map(tokenOf)
      expect(inserts).toBeGreaterThan(1)
      // the tokens are the rows': each owner completes its own
      for (const [i, key] of keys.entries()) {
        expect(yield* store.complete({ scope: "s", key, token: tokens[i]! }, response(i), Duration.hours(1))).toBe(true)
      }
    }).pipe(Effect.scoped, Effect.provide(PgLive)))
})
