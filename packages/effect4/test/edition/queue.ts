/**
 * The queue suites' part of the Effect 4 edition's adapter (test/edition/): what the Consumer, Outbox, PgQueue,
 * RedisStreamQueue and SQL rate limiter store suites (packages/contract/suites/queue/, RateLimiterStore.sql) need
 * that each edition spells or keeps differently: its SQL clients, running on the live clock, the queue's internal
 * names, and its own worker programs. The Effect 3 edition's test/edition/queue.ts exports the same names.
 */
import { Clock, Duration, Effect, Layer, Logger, Schedule } from "effect"
import type { TestClock } from "effect/testing"
import { figures, row } from "../../../../examples/faults/poisonExitReport.js"
import type { PoisonExitRun } from "../../../../examples/faults/poisonExitReport.js"
import { sleepLive } from "../support/eventually.js"

/** `SqlClient`'s module (Effect 3: `@effect/sql/SqlClient`; Effect 4: `effect/sql/SqlClient`). */
export * as SqlClientModule from "effect/sql/SqlClient"

/** PostgreSQL at DATABASE_URL, loaded when first used (Effect 3: `@effect/sql-pg` 0.x; Effect 4: `@effect/sql-pg` 4). */
export const queuePgClient = Layer.unwrap(
  Effect.promise(() => import("../support/pg.js")).pipe(Effect.map((m) => m.PgLive))
)

/**
 * SQLite in `filename` (`":memory:"` too), loaded when first used (Effect 3: `@effect/sql-sqlite-node`; Effect 4:
 * `effect-resilience/Sqlite`, on `node:sqlite`).
 */
export const queueSqlite = (filename: string) =>
  Layer.unwrap(Effect.promise(() => import("../../src/Sqlite.js")).pipe(Effect.map((m) => m.layer({ filename }))))

const run = `${process.pid}_${Date.now().toString(36)}`
let names = 0
/** A table name no other test or run uses (Effect 3: `erq_<what>_…`; Effect 4: `er4q_<what>_…`). */
export const queueFreshName = (what: string): string => `er4q_${what}_${run}_${++names}`

/** Sleeps `duration` of real time, under the TestClock too (Effect 3: `TestServices.provideLive`; Effect 4: `withLive`). */
export const queueSleepLive = (duration: Duration.Input): Effect.Effect<void> => sleepLive(duration)

/** Runs `effect` on the live clock, its forks too (Effect 3: `TestServices.provideLive`; Effect 4: `withLive`). */
export const queueLive = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Clock.clockWith((clock) => "withLive" in clock ? (clock as TestClock.TestClock).withLive(effect) : effect)

/** A retry schedule every `every`, its output that delay (Effect 3: `Schedule.as`; Effect 4: `Schedule.map` to an effect). */
export const queueSpaced = (every: Duration.Input): Schedule.Schedule<Duration.Duration> =>
  Schedule.spaced(every).pipe(Schedule.map(() => Effect.succeed(Duration.fromInputUnsafe(every))))

/** Fails with `error()` when `self` takes longer than `duration` (Effect 3: `timeoutFail`; Effect 4: `timeoutOrElse`). */
export const queueTimeoutFail =
  <E2>(duration: Duration.Input, error: () => E2) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, R> =>
    Effect.timeoutOrElse(self, { duration, orElse: () => Effect.fail(error()) })

/** A logger that drops every line (Effect 3: `Logger.remove(Logger.defaultLogger)`; Effect 4: `Logger.layer([])`). */
export const queueQuietLogger: Layer.Layer<never> = Logger.layer([])

/** A logger layer keeping each line, its parts joined by spaces (Effect 3: the message; Effect 4: its array). */
export const queueLoggedLines = (lines: Array<string>): Layer.Layer<never> =>
  Logger.layer([
    Logger.make(({ message }) => {
      lines.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
    })
  ])

/** The stream queue's Redis keys and its release script (src/internal, alike in both). */
export { streamKeys as queueStreamKeys } from "../../src/internal/queue/redisStreamQueue.js"
export { RELEASE as queueReleaseScript } from "../../src/internal/queue/redisStreamScripts.js"

/** ioredis, the Redis client both editions' queues take (the same package in both). */
export { Cluster as IoCluster, Redis as IoRedis } from "ioredis"

/** Registers `body` when the named services answer; otherwise skips it (fails it in CI) (test/support/services). */
export { describeWith as queueDescribeWith } from "../support/services.js"

/**
 * The poison-exit run (issue 31) with this edition's own worker program, examples/faults/consumerWorker.ts, and the
 * report's figures (examples/faults/poisonExitReport.ts, shared by both editions).
 */
export const observePoisonExit = (kind: "pg" | "redis"): Promise<PoisonExitRun> =>
  import("../../examples/faults/poisonExit.js").then((m) => m.observe(kind))
export { figures as poisonExitFigures, row as poisonExitRow }
