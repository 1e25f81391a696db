/**
 * A queue worker process for the consumer faults: `Consumer.run` over a `PgQueue` or a `RedisStreamQueue`,
 * with the idempotent consumer of `Consumer/Sql` (PostgreSQL, `DATABASE_URL`). Each handling inserts one row
 * into the effects table inside the idempotent transaction, so an effect applied twice is visible there.
 *
 *   node --import tsx examples/faults/consumerWorker.ts --source pg|redis --queue <table or stream>
 *     --effects <table> --processed <table> --name <worker> [--concurrency 4] [--visibility-ms 3000]
 *     [--max-receives 10] [--handle-ms 0] [--ack-delay-ms 0]
 *
 * A body `{ poison: "fatal" }` fails with `Failure.fatal` (dead-lettered at once); `{ poison: "fail" }` writes
 * its effect and then fails with a plain error, so the transaction must roll the effect back, and the message
 * is redelivered until `--max-receives`; `{ poison: "exit" }` ends the process (`process.exit(1)`) as its
 * handler starts, for a supervisor to start it again (examples/faults/poisonExit.ts). Lines on stdout (written
 * synchronously: a pipe on Linux): `ready`, `start <id> <receive count>` (a handler starts), `committed <id>`
 * (the transaction committed, not yet acknowledged; the worker then waits `--ack-delay-ms`, the window between
 * commit and acknowledgement a crash can hit), `skipped <id>` (already applied: a redelivery), `dead <id>`
 * (moved to the dead-letter queue by this worker).
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Redacted, type Scope } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as Consumer from "effect-resilience/Consumer"
import * as ConsumerSql from "effect-resilience/Consumer/Sql"
import * as Failure from "effect-resilience/Failure"
import * as PgQueue from "effect-resilience/PgQueue"
import type * as QueueSource from "effect-resilience/QueueSource"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { Redis } from "ioredis"
import {
  ackDelayMs,
  concurrency,
  effects,
  handleMs,
  maxReceives,
  name,
  processed,
  queue,
  sourceKind,
  visibilityMs,
  type WorkBody
} from "../../../../examples/faults/consumerWorkerArgs.js"
import { databaseUrl, redisUrl } from "./pgSupport.js"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const makeSource = (): Effect.Effect<
  QueueSource.QueueSource<WorkBody>,
  unknown,
  SqlClient.SqlClient | Scope.Scope
> =>
  sourceKind === "pg"
    ? PgQueue.make<WorkBody>({ table: queue, visibilityTimeout: visibilityMs })
    : Effect.flatMap(
      Effect.acquireRelease(
        Effect.sync(() => new Redis(redisUrl(), { maxRetriesPerRequest: 1 })),
        (redis) => Effect.sync(() => redis.disconnect())
      ),
      (redis) =>
        RedisStreamQueue.make<WorkBody>({
          redis,
          stream: queue,
          visibilityTimeout: visibilityMs,
          consumer: name,
          reclaimInterval: Math.max(1, Math.floor(visibilityMs / 4))
        })
    )

// the handler's effect, in the idempotent consumer's transaction: the id and the effect commit together
const apply = ConsumerSql.idempotent(
  (message: QueueSource.Message<WorkBody>) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      if (message.body.poison === "fatal") return yield* Effect.fail(Failure.fatal("poison message (fatal)"))
      yield* sql`INSERT INTO ${sql(effects)} (message_id, worker) VALUES (${message.id}, ${name})`
      if (handleMs > 0) yield* Effect.sleep(handleMs)
      if (message.body.poison === "fail") return yield* Effect.fail(new Error("poison message (always fails)"))
    }),
  { table: processed }
)

const main = Effect.gen(function*() {
  const source = yield* makeSource()
  yield* Consumer.run({
    source,
    handler: (message) =>
      say(`start ${message.id} ${message.receiveCount}`).pipe(
        Effect.zipRight(message.body.poison === "exit" ? Effect.sync(() => process.exit(1)) : apply(message)),
        // a terminated connection, a failed commit: try again within the delivery (the id makes it safe)
        Effect.catchTag("SqlError", (e) => Effect.fail(Failure.retryable(e))),
        Effect.tap((applied) => say(`${Option.isSome(applied) ? "committed" : "skipped"} ${message.id}`)),
        Effect.tap(() => ackDelayMs > 0 ? Effect.sleep(ackDelayMs) : Effect.void)
      ),
    concurrency,
    maxReceiveCount: maxReceives,
    retry: { schedule: Backoff.fullJitter({ base: "20 millis", cap: "200 millis" }), maxAttempts: 5 },
    timeout: Math.max(1, Math.floor(visibilityMs * 2 / 3)),
    pollInterval: "50 millis",
    onDeadLetter: (message) => say(`dead ${message.id}`)
  })
  yield* say("ready")
  return yield* Effect.never
})

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.orDie(PgClient.layer({ url: Redacted.make(databaseUrl()), connectTimeout: "5 seconds" }))),
  NodeRuntime.runMain
)
