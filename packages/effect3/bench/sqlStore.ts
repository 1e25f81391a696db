/**
 * Decisions/s of the SQL rate-limit store (`limiter.tryAcquire` through Effect, one upsert each), beside the
 * Redis store's figures of `redis.ts`: a token bucket over 10,000 keys at concurrency 1 and 64 on PostgreSQL
 * (`DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`), and at concurrency 1 on SQLite (a temp
 * file; SQLite serialises writers, so more fibers only queue). Without a reachable PostgreSQL its rows are
 * skipped. Each run uses its own table and drops it.
 */
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Redacted } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Case } from "./harness.js"

const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }
const table = `bench_rate_limits_${process.pid}`

export const cases: ReadonlyArray<Case> = []
export const targets: ReadonlyArray<readonly [string, string, number, "absolute"]> = []

const name = (db: string, c: number) => `limiter.tryAcquire (${db}, c=${c})`

/** Decisions per second of `concurrency` fibers for `millis`. */
const decisions = (limiter: RateLimiter.RateLimiter, concurrency: number, millis: number) =>
  Effect.gen(function*() {
    let done = 0
    const start = process.hrtime.bigint()
    const end = start + BigInt(millis) * 1_000_000n
    yield* Effect.forEach(
      Array.from({ length: concurrency }, (_, w) => w),
      (w) =>
        Effect.gen(function*() {
          for (let i = w; process.hrtime.bigint() < end; i += concurrency) {
            yield* limiter.tryAcquire(keys[i % KEYS]!)
            done++
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    return done / (Number(process.hrtime.bigint() - start) / 1e9)
  })

const median = (xs: Array<number>): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** ns per decision at each concurrency: a warm-up, then the median of 5 rounds. */
const measure = (db: string, client: Layer.Layer<SqlClient.SqlClient, unknown>, concurrencies: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.tokenBucket(params)
    const out: Record<string, number> = {}
    for (const c of concurrencies) {
      yield* decisions(limiter, c, 300)
      const rounds: Array<number> = []
      for (let round = 0; round < 5; round++) rounds.push(yield* decisions(limiter, c, 400))
      out[name(db, c)] = 1e9 / median(rounds)
    }
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
    return out
  }).pipe(
    Effect.provide(Layer.merge(
      RateLimiterStoreSql.layer({ table, cleanup: false }).pipe(Layer.provide(client)),
      client
    )),
    Effect.scoped
  )

let skipped = false

export const extra = async (): Promise<Record<string, number>> => {
  const dir = mkdtempSync(join(tmpdir(), "bench-rl-sql-"))
  try {
    const sqlite = await Effect.runPromise(
      measure("sqlite", SqliteClient.layer({ filename: join(dir, "rl.db") }), [1])
    )
    const pg = PgClient.layer({ url: Redacted.make(url), connectTimeout: "2 seconds", maxConnections: 16 })
    const postgres = await Effect.runPromise(Effect.orElseSucceed(measure("postgres", pg, [1, 64]), () => {
      skipped = true
      return {}
    }))
    return { ...postgres, ...sqlite }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const perSecond = (nsPerOp: number) => `${(1e6 / nsPerOp).toFixed(1)}k/s`

export const report = async (nsPerOp: ReadonlyMap<string, number>): Promise<void> => {
  console.log(
    `\nSQL rate-limit store, token bucket decisions/s (one upsert each; the redis lines above for comparison):`
  )
  if (skipped) console.log(`  postgres: none reachable at ${url} — skipped`)
  for (const [db, c] of [["postgres", 1], ["postgres", 64], ["sqlite", 1]] as const) {
    const ns = nsPerOp.get(name(db, c))
    const redis = nsPerOp.get(`limiter.tryAcquire (redis, c=${c})`)
    if (ns === undefined) continue
    const versus = redis === undefined ? "" : `  ${(redis / ns).toFixed(2)}× of redis at c=${c}`
    console.log(`  ${name(db, c)}`.padEnd(56), perSecond(ns).padStart(10), versus)
  }
}
