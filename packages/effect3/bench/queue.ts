/**
 * Issue #7: messages/s end to end (claim → handler → ack) through `Consumer.run` for each source at
 * concurrency 1 and 16, beside the raw claim loop of the same engine without this library (the floor):
 *
 * - memory: an Effect `Queue` drained with `takeUpTo`, no visibility bookkeeping;
 * - PostgreSQL: the same `FOR UPDATE SKIP LOCKED` claim and `DELETE` ack, hand-written on `@effect/sql`;
 * - Redis: `XREADGROUP` + `XACK`/`XDEL` per message on `ioredis`.
 *
 * Both sides claim up to 32 per round trip; the raw loop acknowledges each message on its own, as a simple
 * consumer does, and `Consumer.run` acknowledges the messages it handled in groups (`QueueSource.ackMany`).
 * The handler does nothing, so the figures are the cost of the queue machinery. Results go in as ns per
 * message (so `--json` carries them); the report prints messages/s and, for the durable sources, the
 * throughput of `Consumer.run` as a share of the raw loop's against the targets of issue #22. The two sides
 * run by turns, `ROUNDS` times each, and the median of each is kept: on a shared machine one pair may land
 * in a quiet moment and the other in a busy one. A source whose service is unreachable (`DATABASE_URL`,
 * `REDIS_URL`) is skipped with a note; `BENCH_QUEUE_ENGINES` (e.g. `redis`) picks the engines to run.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Effect, Queue, Redacted } from "effect"
import * as Consumer from "effect-resilience/Consumer"
import * as PgQueue from "effect-resilience/PgQueue"
import * as QueueSource from "effect-resilience/QueueSource"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { Redis } from "ioredis"
import type { Case } from "./harness.js"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const BATCH = 32
const ROUNDS = 3

/** Issue #22: messages/s end to end as a share of the raw loop's, at least. */
const throughputTargets: ReadonlyArray<readonly [engine: string, c: number, atLeast: number]> = [
  ["postgres", 1, 0.6],
  ["postgres", 16, 0.8],
  ["redis", 1, 0.6],
  ["redis", 16, 0.6]
]
/** `BENCH_QUEUE_ENGINES=redis` (a comma list) runs only those engines; all three by default. */
const engines = (process.env.BENCH_QUEUE_ENGINES ?? "memory,postgres,redis").split(",")
const run = `${process.pid}_${Date.now().toString(36)}`

export const cases: ReadonlyArray<Case> = []
/** [case, reference, at least, "throughput": the case's messages/s ÷ the reference's] */
export const targets: ReadonlyArray<readonly [string, string, number, "throughput"]> = throughputTargets.map((
  [engine, c, atLeast]
) => [`queue ${engine} end-to-end c=${c}`, `queue ${engine} raw claim loop c=${c}`, atLeast, "throughput"] as const)

const notes: Array<string> = []

/** Sends `n` messages, runs a consumer until all are acknowledged: ns per message. */
const endToEnd = <E, R>(
  source: QueueSource.QueueSource<number>,
  n: number,
  concurrency: number,
  reset: Effect.Effect<void, E, R> = Effect.void as Effect.Effect<void, E, R>
) =>
  Effect.gen(function*() {
    yield* reset
    yield* source.send(Array.from({ length: n }, (_, i) => ({ id: `m-${i}`, body: i })))
    const start = process.hrtime.bigint()
    const consumer = yield* Consumer.run({
      source,
      handler: () => Effect.void,
      maxReceiveCount: 5,
      concurrency,
      bufferSize: BATCH,
      batchSize: BATCH,
      pollInterval: "1 millis"
    })
    while ((yield* consumer.stats).processed < n) yield* Effect.sleep("1 millis")
    return Number(process.hrtime.bigint() - start) / n
  }).pipe(Effect.scoped)

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Runs both sides by turns, `ROUNDS` times: the median ns per message of each. */
const byTurns = <E, R>(
  endToEndRun: Effect.Effect<number, E, R>,
  rawRun: Effect.Effect<number, E, R>
): Effect.Effect<readonly [endToEnd: number, raw: number], E, R> =>
  Effect.gen(function*() {
    const e2e: Array<number> = []
    const raw: Array<number> = []
    for (let round = 0; round < ROUNDS; round++) {
      e2e.push(yield* endToEndRun)
      raw.push(yield* rawRun)
    }
    return [median(e2e), median(raw)] as const
  })

/** Runs `worker` `concurrency` times at once until it returns 0 claimed: ns per message. */
const rawLoop = <E, R>(n: number, concurrency: number, claim: Effect.Effect<number, E, R>) =>
  Effect.gen(function*() {
    const start = process.hrtime.bigint()
    let done = 0
    yield* Effect.forEach(
      Array.from({ length: concurrency }),
      () =>
        Effect.gen(function*() {
          for (;;) {
            const got = yield* claim
            done += got
            if (got === 0) return
          }
        }),
      { concurrency, discard: true }
    )
    if (done !== n) throw new Error(`raw loop claimed ${done} of ${n}`)
    return Number(process.hrtime.bigint() - start) / n
  })

const memory = async (out: Record<string, number>) => {
  const n = 20_000
  for (const c of [1, 16]) {
    const source = await Effect.runPromise(QueueSource.memory<number>({ visibilityTimeout: "1 minute" }))
    out[`queue memory end-to-end c=${c}`] = await Effect.runPromise(endToEnd(source, n, c))
    const raw = await Effect.runPromise(Effect.gen(function*() {
      const q = yield* Queue.unbounded<number>()
      yield* Queue.offerAll(q, Array.from({ length: n }, (_, i) => i))
      return yield* rawLoop(n, c, Effect.map(Queue.takeUpTo(q, BATCH), Chunk.size))
    }))
    out[`queue memory raw claim loop c=${c}`] = raw
  }
}

const postgres = async (out: Record<string, number>) => {
  const PgLive = PgClient.layer({ url: Redacted.make(databaseUrl), connectTimeout: "2 seconds", maxConnections: 20 })
  const reachable = await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`).pipe(
      Effect.provide(PgLive),
      Effect.match({ onFailure: () => false, onSuccess: () => true })
    )
  )
  if (!reachable) return void notes.push(`PostgreSQL skipped: not reachable at ${databaseUrl}`)
  const table = `er_bench_${run}`
  const n = 3_000
  await Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const source = yield* PgQueue.make<number>({ table, visibilityTimeout: "1 minute" })
      const clear = sql`DELETE FROM ${sql(table)}`
      const claim = Effect.gen(function*() {
        const now = Date.now()
        const rows = yield* sql<{ readonly seq: string }>`WITH c AS (
          SELECT seq FROM ${sql(table)} WHERE visible_at <= ${now} ORDER BY visible_at, seq LIMIT ${BATCH}
          FOR UPDATE SKIP LOCKED)
        UPDATE ${sql(table)} j SET visible_at = ${now + 60_000}, receive_count = j.receive_count + 1
        FROM c WHERE j.seq = c.seq RETURNING j.seq::text AS seq, j.id, j.body`
        // one ack per message, as a consumer does
        yield* Effect.forEach(rows, (row) => sql`DELETE FROM ${sql(table)} WHERE seq = ${row.seq}`, { discard: true })
        return rows.length
      })
      try {
        for (const c of [1, 16]) {
          const raw = Effect.gen(function*() {
            yield* clear
            yield* source.send(Array.from({ length: n }, (_, i) => ({ id: `m-${i}`, body: i })))
            return yield* rawLoop(n, c, claim)
          })
          const [e2e, floor] = yield* byTurns(endToEnd(source, n, c, clear), raw)
          out[`queue postgres end-to-end c=${c}`] = e2e
          out[`queue postgres raw claim loop c=${c}`] = floor
        }
      } finally {
        yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
        yield* sql`DROP TABLE IF EXISTS ${sql(`${table}_dlq`)}`
      }
    }).pipe(Effect.provide(PgLive))
  )
}

const redis = async (out: Record<string, number>) => {
  const client = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 1 })
  client.on("error", () => {})
  try {
    await client.connect()
    await client.ping()
  } catch {
    client.disconnect()
    return void notes.push(`Redis skipped: not reachable at ${redisUrl}`)
  }
  const n = 5_000
  const stream = `bench:queue:${run}`
  try {
    for (const c of [1, 16]) {
      let round = 0
      const e2e = Effect.suspend(() => {
        const s = `${stream}:${c}:${round++}`
        return Effect.flatMap(
          RedisStreamQueue.make<number>({ redis: client, stream: s, visibilityTimeout: "1 minute" }),
          (source) => endToEnd<never, never>(source, n, c)
        )
      })
      const rawRun = Effect.gen(function*() {
        const raw = `${stream}:raw:${c}:${round}`
        yield* Effect.promise(async () => {
          await client.xgroup("CREATE", raw, "g", "0", "MKSTREAM")
          const pipeline = client.pipeline()
          for (let i = 0; i < n; i++) pipeline.xadd(raw, "*", "id", `m-${i}`, "body", String(i))
          await pipeline.exec()
        })
        const claim = Effect.promise(async () => {
          const read = await client.xreadgroup("GROUP", "g", "c", "COUNT", BATCH, "STREAMS", raw, ">") as
            | Array<[string, Array<[string, Array<string>]>]>
            | null
          const entries = read?.[0]?.[1] ?? []
          for (const [id] of entries) await client.multi().xack(raw, "g", id).xdel(raw, id).exec() // one ack each
          return entries.length
        })
        return yield* rawLoop(n, c, claim)
      })
      const [endToEndNs, rawNs] = await Effect.runPromise(byTurns(e2e, rawRun))
      out[`queue redis end-to-end c=${c}`] = endToEndNs
      out[`queue redis raw claim loop c=${c}`] = rawNs
    }
  } finally {
    const keys = await client.keys(`${stream}*`)
    if (keys.length > 0) await client.del(...keys)
    client.disconnect()
  }
}

/** Measured outside the harness: throughput needs concurrency. */
export const extra = async (): Promise<Record<string, number>> => {
  const out: Record<string, number> = {}
  if (engines.includes("memory")) await memory(out)
  if (engines.includes("postgres")) await postgres(out)
  if (engines.includes("redis")) await redis(out)
  return out
}

const perSecond = (ns: number | undefined) => ns === undefined ? "-" : `${Math.round(1e9 / ns).toLocaleString("en")}/s`

/** Printed after the cases (not with --json). */
export const report = async (nsPerOp: ReadonlyMap<string, number>): Promise<void> => {
  console.log("\nqueue messages/s, claim → handler (no-op) → ack; beside the raw claim loop of the engine:")
  console.log(`${"".padEnd(12)}${"c=1".padStart(26)}${"c=16".padStart(26)}`)
  for (const engine of ["memory", "postgres", "redis"]) {
    if (!nsPerOp.has(`queue ${engine} end-to-end c=1`)) continue
    for (const what of ["end-to-end", "raw claim loop"]) {
      const row = [1, 16].map((c) => perSecond(nsPerOp.get(`queue ${engine} ${what} c=${c}`)).padStart(26)).join("")
      console.log(`${`${engine} ${what}`.padEnd(24)}${row}`)
    }
  }
  console.log(`\nqueue end-to-end throughput as a share of the raw loop's (median of ${ROUNDS} turns each):`)
  for (const [engine, c, atLeast] of throughputTargets) {
    const e2e = nsPerOp.get(`queue ${engine} end-to-end c=${c}`)
    const raw = nsPerOp.get(`queue ${engine} raw claim loop c=${c}`)
    if (e2e === undefined || raw === undefined) continue
    const share = raw / e2e
    const verdict = share >= atLeast ? "ok" : "MISSED"
    console.log(`${`${engine} c=${c}`.padEnd(40)} ${share.toFixed(3)}×  (target ≥ ${atLeast}×) ${verdict}`)
  }
  for (const note of notes) console.log(`  note: ${note}`)
}
