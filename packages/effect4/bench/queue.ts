/**
 * Issues #7 and #22: messages/s end to end (claim → handler → ack) through `Consumer.run` for each source at
 * concurrency 1 and 16, against the raw claim loop of the same engine without this library (the floor):
 *
 * - memory: an Effect `Queue` drained with `takeBetween(1, 32)`, no visibility bookkeeping (reported, not judged);
 * - PostgreSQL: the same `FOR UPDATE SKIP LOCKED` claim and `DELETE` ack, hand-written on `effect/sql` (`PgClient`);
 * - Redis: `XREADGROUP` + `XACK`/`XDEL` per message on `ioredis`.
 *
 * Both sides claim up to 32 per round trip; the raw loop acknowledges each message on its own, as a simple consumer
 * does, and `Consumer.run` acknowledges the messages it handled in groups. The handler does nothing, so the figures
 * are the cost of the queue machinery. The two sides run by turns, `ROUNDS` times each, the median of each kept.
 * Targets (issue #22): end-to-end throughput ≥ 0.6× of the raw loop's (PostgreSQL at c=16: ≥ 0.8×). A source
 * whose service is unreachable (`DATABASE_URL`, `REDIS_URL`) is skipped with a note; `BENCH_QUEUE_ENGINES` (e.g.
 * `redis`) picks the engines to run.
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Effect, Queue, Redacted } from "effect"
import * as Consumer from "effect-resilience/Consumer"
import * as PgQueue from "effect-resilience/PgQueue"
import * as QueueSource from "effect-resilience/QueueSource"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import * as SqlClient from "effect/sql/SqlClient"
import { connect, redisUrl } from "../../../bench/redis.js"
import { type Comparison, median, type Suite, type Target } from "../../../bench/report.js"

const databaseUrl = process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
const BATCH = 32
const ROUNDS = 3

/** Issue #22: messages/s end to end as a share of the raw loop's, at least. */
const targets: Record<string, Target | undefined> = {
  "postgres c=1": { atLeast: 0.6 },
  "postgres c=16": { atLeast: 0.8 },
  "redis c=1": { atLeast: 0.6 },
  "redis c=16": { atLeast: 0.6 }
}
const engines = (process.env["BENCH_QUEUE_ENGINES"] ?? "memory,postgres,redis").split(",")
const run = `${process.pid}_${Date.now().toString(36)}`
const e2eName = (engine: string, c: number) => `queue ${engine} end-to-end c=${c}`
const rawName = (engine: string, c: number) => `queue ${engine} raw claim loop c=${c}`

/** Sends `n` messages, runs a consumer until all are acknowledged: ns per message. */
const endToEnd = <E, R>(
  source: QueueSource.QueueSource<number>,
  n: number,
  concurrency: number,
  reset: Effect.Effect<void, E, R> = Effect.void as Effect.Effect<void, E, R>
) =>
  Effect.scoped(Effect.gen(function*() {
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
  }))

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

/** Runs `claim` from `concurrency` fibers at once until each gets 0 claimed: ns per message. */
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
    if (done !== n) return yield* Effect.die(new Error(`raw loop claimed ${done} of ${n}`))
    return Number(process.hrtime.bigint() - start) / n
  })

const memory = async (out: Record<string, number>) => {
  const n = 20_000
  for (const c of [1, 16]) {
    const source = await Effect.runPromise(QueueSource.memory<number>({ visibilityTimeout: "1 minute" }))
    out[e2eName("memory", c)] = await Effect.runPromise(endToEnd(source, n, c))
    out[rawName("memory", c)] = await Effect.runPromise(Effect.gen(function*() {
      const q = yield* Queue.unbounded<number, Cause.Done>()
      yield* Queue.offerAll(q, Array.from({ length: n }, (_, i) => i))
      // ended: once drained, a take fails with `Done` (0 claimed) instead of waiting
      yield* Queue.end(q)
      const claim = Effect.orElseSucceed(Queue.takeBetween(q, 1, BATCH), () => [])
      return yield* rawLoop(n, c, Effect.map(claim, (batch) => batch.length))
    }))
  }
}

const postgres = async (out: Record<string, number>, notes: Array<string>) => {
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
      const clear = Effect.asVoid(sql`DELETE FROM ${sql(table)}`)
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
      yield* Effect.ensuring(
        Effect.gen(function*() {
          for (const c of [1, 16]) {
            const raw = Effect.gen(function*() {
              yield* clear
              yield* source.send(Array.from({ length: n }, (_, i) => ({ id: `m-${i}`, body: i })))
              return yield* rawLoop(n, c, claim)
            })
            const [e2e, floor] = yield* byTurns(endToEnd(source, n, c, clear), raw)
            out[e2eName("postgres", c)] = e2e
            out[rawName("postgres", c)] = floor
          }
        }),
        Effect.ignore(Effect.andThen(
          sql`DROP TABLE IF EXISTS ${sql(table)}`,
          sql`DROP TABLE IF EXISTS ${sql(`${table}_dlq`)}`
        ))
      )
    }).pipe(Effect.provide(PgLive))
  )
}

const redis = async (out: Record<string, number>, notes: Array<string>) => {
  const client = await connect()
  if (client === undefined) return void notes.push(`Redis skipped: not reachable at ${redisUrl()}`)
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
      out[e2eName("redis", c)] = endToEndNs
      out[rawName("redis", c)] = rawNs
    }
  } finally {
    const keys = await client.keys(`${stream}*`)
    if (keys.length > 0) await client.del(...keys)
    client.disconnect()
  }
}

export const suite: Suite = {
  name: "queue",
  run: async () => {
    const out: Record<string, number> = {}
    const notes: Array<string> = []
    if (engines.includes("memory")) await memory(out)
    if (engines.includes("postgres")) await postgres(out, notes)
    if (engines.includes("redis")) await redis(out, notes)
    const comparisons: Array<Comparison> = []
    for (const engine of ["memory", "postgres", "redis"]) {
      for (const c of [1, 16]) {
        const e2e = out[e2eName(engine, c)]
        const raw = out[rawName(engine, c)]
        if (e2e === undefined || raw === undefined) continue
        const target = targets[`${engine} c=${c}`]
        comparisons.push({
          case: e2eName(engine, c),
          baseline: rawName(engine, c),
          kind: "throughput",
          ratio: raw / e2e,
          ...(target === undefined ? {} : { target })
        })
      }
    }
    notes.push(`median of ${ROUNDS} turns of each side; the handler does nothing`)
    return { cases: out, comparisons, notes }
  }
}
