/**
 * What the queue-consumer faults share: a queue of either durable source with its tables and keys, the
 * worker processes (examples/faults/consumerWorker.ts), and the count of effects per message.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, type Scope } from "effect"
import * as PgQueue from "effect-resilience/PgQueue"
import type * as QueueSource from "effect-resilience/QueueSource"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { Redis } from "ioredis"
import type { WorkBody } from "../../../../examples/faults/consumerWorkerArgs.js"
import { type Child, redisUrl, spawnScript } from "./pgSupport.js"

export type SourceKind = "pg" | "redis"

export interface FaultQueue {
  readonly kind: SourceKind
  /** The PgQueue table or the Redis stream. */
  readonly queue: string
  readonly effects: string
  readonly processed: string
  readonly source: QueueSource.QueueSource<WorkBody>
  /** Nothing left in the queue: every message acknowledged or dead-lettered. */
  readonly drained: Effect.Effect<boolean, unknown>
  /** Effect rows per message id. */
  readonly effectCounts: Effect.Effect<ReadonlyMap<string, number>, unknown>
  /** The ids in the dead-letter queue. */
  readonly deadLettered: Effect.Effect<ReadonlyArray<string>, unknown>
}

/**
 * Creates the effects table (no unique constraint: a second effect of one message is a second row), the
 * idempotent consumer's table and the queue, all named after `name`; drops or deletes them when the scope
 * closes.
 */
export const makeQueue = (
  kind: SourceKind,
  name: string
): Effect.Effect<FaultQueue, unknown, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const effects = `${name}_effects`
    const processed = `${name}_processed`
    const queue = name
    const drop = (tables: ReadonlyArray<string>) =>
      Effect.forEach(tables, (t) => sql`DROP TABLE IF EXISTS ${sql(t)}`, { discard: true }).pipe(Effect.ignore)
    yield* Effect.addFinalizer(() => drop([effects, processed]))
    yield* sql`CREATE TABLE ${sql(effects)} (seq BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL, worker TEXT NOT NULL)`
    yield* sql`CREATE TABLE ${sql(processed)} (message_id TEXT PRIMARY KEY, processed_at BIGINT NOT NULL)`
    const effectCounts = Effect.map(
      sql<{ readonly message_id: string; readonly n: number }>`
        SELECT message_id, count(*)::int AS n FROM ${sql(effects)} GROUP BY message_id`,
      (rows) => new Map(rows.map((r) => [r.message_id, r.n]))
    )
    if (kind === "pg") {
      yield* Effect.addFinalizer(() => drop([queue, `${queue}_dlq`]))
      const source = yield* PgQueue.make<WorkBody>({ table: queue, visibilityTimeout: "3 seconds" })
      return {
        kind,
        queue,
        effects,
        processed,
        source,
        drained: Effect.map(sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM ${sql(queue)}`, (r) =>
          r[0]!.n === 0),
        effectCounts,
        deadLettered: Effect.map(source.deadLetters.list({ limit: 10_000 }), (l) =>
          l.map((d) => d.id))
      }
    }
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => new Redis(redisUrl(), { maxRetriesPerRequest: 1 })),
      (redis) =>
        Effect.promise(() => redis.del(queue, `${queue}:dlq`, `${queue}:dlq:ids`, `${queue}:errors`)).pipe(
          Effect.ignore,
          Effect.zipRight(Effect.sync(() => redis.disconnect()))
        )
    )
    const source = yield* RedisStreamQueue.make<WorkBody>({ redis, stream: queue, visibilityTimeout: "3 seconds" })
    return {
      kind,
      queue,
      effects,
      processed,
      source,
      // acknowledged entries are deleted (XACK + XDEL): an empty stream has nothing pending either
      drained: Effect.map(Effect.promise(() => redis.xlen(queue)), (n) => n === 0),
      effectCounts,
      deadLettered: Effect.map(source.deadLetters.list({ limit: 10_000 }), (l) => l.map((d) => d.id))
    }
  })

/** Sends `count` messages `<prefix>-<i>`; the ids in `poison` carry their poison. */
export const sendMessages = (
  q: FaultQueue,
  prefix: string,
  count: number,
  poison: (i: number) => WorkBody["poison"] | undefined = () => undefined
) => {
  const messages = Array.from({ length: count }, (_, i) => {
    const p = poison(i)
    return { id: `${prefix}-${i}`, body: p === undefined ? { n: i } : { n: i, poison: p } }
  })
  return Effect.as(q.source.send(messages), messages)
}

/** Starts a worker process on `q`, without waiting for it (`visibilityMs`: its sources' visibility timeout). */
export const spawnWorker = (
  q: FaultQueue,
  name: string,
  extra: ReadonlyArray<string> = [],
  env: Record<string, string> = {},
  visibilityMs = 3000
): Effect.Effect<Child, never, Scope.Scope> =>
  spawnScript(name, "examples/faults/consumerWorker.ts", [
    "--source",
    q.kind,
    "--queue",
    q.queue,
    "--effects",
    q.effects,
    "--processed",
    q.processed,
    "--name",
    name,
    "--visibility-ms",
    String(visibilityMs),
    ...extra
  ], env)

/** Starts a worker process on `q` and waits until it consumes. */
export const startWorker = (
  q: FaultQueue,
  name: string,
  extra: ReadonlyArray<string> = [],
  env: Record<string, string> = {}
): Effect.Effect<Child, Error, Scope.Scope> =>
  Effect.tap(spawnWorker(q, name, extra, env), (child) => child.waitFor(/^ready$/, "60 seconds"))

/** Lines `<verb> <id>` of the workers, counted per id. */
export const countLines = (children: ReadonlyArray<Child>, verb: string): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const child of children) {
    for (const line of child.lines) {
      if (line.startsWith(`${verb} `)) {
        const id = line.slice(verb.length + 1)
        counts.set(id, (counts.get(id) ?? 0) + 1)
      }
    }
  }
  return counts
}
