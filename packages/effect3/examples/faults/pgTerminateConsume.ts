/**
 * Fault "pg-terminate-consume": two `PgQueue` worker processes (examples/faults/consumerWorker.ts, the
 * idempotent consumer of `Consumer/Sql`) consume messages, some of them poison, while their PostgreSQL
 * backends are terminated — in the middle of a receive, a handler's transaction, a commit, an ack or a
 * dead-lettering. Afterwards: every good message applied exactly once (one effect row), every poison
 * message dead-lettered exactly once and none of its effects committed, no good message dead-lettered.
 */
import { Effect, Layer } from "effect"
import type { Fault, FaultRow } from "../../../../examples/faults/fault.js"
import { countLines, makeQueue, sendMessages, startWorker } from "./consumerSupport.js"
import {
  adminLayer,
  databaseUrl,
  describeTerminations,
  runName,
  startTerminator,
  waitUntil,
  withApplicationName
} from "./pgSupport.js"

const MESSAGES = 300
/**
 * Every 15th message fails with `Failure.fatal` (dead-lettered at once); every 30th from the 8th fails with a
 * plain error after writing its effect (rolled back; redelivered until `--max-receives`, then dead-lettered).
 */
const poisonOf = (i: number) => i % 15 === 0 ? "fatal" as const : i % 30 === 7 ? "fail" as const : undefined

export const run = (options: { readonly messages?: number } = {}): Promise<ReadonlyArray<FaultRow>> => {
  const offered = options.messages ?? MESSAGES
  const name = runName("consume")
  return Effect.gen(function*() {
    const q = yield* makeQueue("pg", name)
    const quoted = (table: string) => `"${table}"`
    const classify = (text: string): string => {
      const query = text.trim()
      if (query.startsWith(`INSERT INTO ${quoted(q.effects)}`)) return "handler-effect"
      if (query.startsWith(`INSERT INTO ${quoted(q.processed)}`)) return "idempotency-insert"
      if (query.startsWith("WITH claimed")) return "receive"
      if (query.startsWith("WITH moved")) return "dead-letter"
      if (query.startsWith(`DELETE FROM ${quoted(q.queue)}`)) return "ack"
      if (query.startsWith(`UPDATE ${quoted(q.queue)}`)) return "release"
      return query.split(/\s/)[0]!.toLowerCase() // commit, begin, rollback, ...
    }
    const app = `${name}_w`
    const env = { DATABASE_URL: withApplicationName(databaseUrl(), app) }
    const args = ["--concurrency", "4", "--handle-ms", "5", "--max-receives", "10"]
    const workers = yield* Effect.all([
      startWorker(q, `${name}_a`, args, env),
      startWorker(q, `${name}_b`, args, env)
    ], { concurrency: 2 })
    const terminator = yield* startTerminator({
      applicationName: app,
      lockTables: [q.effects, q.queue, q.processed],
      classify,
      pauseMillis: [60, 180]
    })
    // sent once both workers consume and the terminator runs
    const messages = yield* sendMessages(q, name, offered, poisonOf)
    const started = performance.now()
    yield* waitUntil("the queue drained under terminations", q.drained, { within: "50 seconds" })
    const millis = performance.now() - started
    const terminations = yield* terminator.stop
    const crashed = workers.filter((w) => w.exited()).map((w) => w.label)

    const counts = yield* q.effectCounts
    const dead = new Set(yield* q.deadLettered)
    const deadLines = countLines(workers, "dead")
    let lost = 0
    let duplicated = 0
    let poison = 0
    let goodDead = 0
    for (const [i, m] of messages.entries()) {
      const n = counts.get(m.id) ?? 0
      if (poisonOf(i) !== undefined) {
        poison++
        // a poison message must be dead-lettered once, and its failed handlings must have rolled back
        if (!dead.has(m.id)) lost++
        if (n > 0 || (deadLines.get(m.id) ?? 0) > 1) duplicated++
      } else {
        if (n === 0) lost++
        if (n > 1) duplicated++
        if (dead.has(m.id)) goodDead++
      }
    }
    const reported = [...deadLines.values()].reduce((a, b) => a + b, 0)
    const row: FaultRow = {
      fault: "PostgreSQL backends terminated mid-consume under 2 PgQueue workers (idempotent consumer)",
      offered,
      lost,
      duplicated,
      notes: `${describeTerminations(terminations)} over ${(millis / 1000).toFixed(1)} s; ${poison} poison, ` +
        `${dead.size} dead-lettered (${reported} reported by the workers)` +
        (goodDead > 0 ? `; ${goodDead} good messages dead-lettered` : "") +
        (crashed.length > 0 ? `; exited: ${crashed.join(", ")}` : ""),
      ok: crashed.length === 0 && goodDead === 0 && (terminations.byKind["mid-handler-effect"] ?? 0) > 0
    }
    return [row]
  }).pipe(Effect.scoped, Effect.provide(Layer.orDie(adminLayer())), Effect.runPromise)
}

export const pgTerminateConsume: Fault = { name: "pg-terminate-consume", run: () => run() }
