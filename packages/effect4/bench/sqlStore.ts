/**
 * Decisions/s of the SQL rate-limit store (`limiter.tryAcquire` through Effect, one upsert each), beside the Redis
 * store's figures of `redis.ts`: a token bucket over 10,000 keys at concurrency 1 and 64 on PostgreSQL
 * (`DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`), and at concurrency 1 on SQLite (the edition's
 * own driver over `node:sqlite`, a temp file; SQLite serialises writers, so more fibers only queue). Without a
 * reachable PostgreSQL its rows are skipped. Each run uses its own table and drops it. Reported, not judged.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
import * as Sqlite from "effect-resilience/Sqlite"
import * as SqlClient from "effect/sql/SqlClient"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { median, type Suite } from "../../../bench/report.js"
import { inEffect } from "./harness.js"

const url = process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }
const table = `bench_rate_limits_${process.pid}`

const name = (db: string, c: number) => `limiter.tryAcquire (${db}, c=${c})`

/** ns per decision at each concurrency: a warm-up, then the median of 5 rounds. */
const measure = <E>(
  db: string,
  client: Layer.Layer<SqlClient.SqlClient, E>,
  concurrencies: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.tokenBucket(params)
    const out: Record<string, number> = {}
    for (const c of concurrencies) {
      const decisions = (millis: number) => inEffect(c, millis, (i) => limiter.tryAcquire(keys[i % KEYS]!))
      yield* Effect.promise(() => decisions(300))
      const rounds: Array<number> = []
      for (let round = 0; round < 5; round++) rounds.push(yield* Effect.promise(() => decisions(400)))
      out[name(db, c)] = 1e9 / median(rounds)
    }
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
    return out
  }).pipe(
    Effect.provide(Layer.merge(
      RateLimiterStoreSql.layer({ table, cleanup: false }).pipe(Layer.provide(client)),
      client
    ))
  )

export const suite: Suite = {
  name: "sql",
  run: async () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-rl-sql-"))
    const notes: Array<string> = []
    try {
      const sqlite = await Effect.runPromise(measure("sqlite", Sqlite.layer({ filename: join(dir, "rl.db") }), [1]))
      const pg = PgClient.layer({ url: Redacted.make(url), connectTimeout: "2 seconds", maxConnections: 16 })
      const postgres = await Effect.runPromise(
        Effect.orElseSucceed(measure("postgres", pg, [1, 64]), () => {
          notes.push(`postgres: none reachable at ${url}: skipped`)
          return {}
        })
      )
      notes.push("one upsert per decision; compare with the redis suite's limiter lines")
      return { cases: { ...postgres, ...sqlite }, notes }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
