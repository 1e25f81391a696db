/**
 * Faults "consumer-kill-pg" and "consumer-kill-redis": a worker process (examples/faults/consumerWorker.ts,
 * `Consumer.run` with the idempotent consumer of `Consumer/Sql`) is SIGKILLed in the middle of a batch, at
 * the moment it reports a committed message it has not acknowledged yet; a second worker then finishes the
 * queue, taking the first one's messages over after their visibility timeout. Every message must have been
 * handled exactly once: one row in the effects table.
 */
import { Effect, Layer } from "effect"
import type { Fault, FaultRow } from "../../../../examples/faults/fault.js"
import { countLines, makeQueue, sendMessages, type SourceKind, startWorker } from "./consumerSupport.js"
import { adminLayer, runName, waitUntil } from "./pgSupport.js"

const MESSAGES = 200

export const run = (
  kind: SourceKind,
  options: { readonly messages?: number } = {}
): Promise<ReadonlyArray<FaultRow>> => {
  const offered = options.messages ?? MESSAGES
  const name = runName(`kill_${kind}`)
  return Effect.gen(function*() {
    const q = yield* makeQueue(kind, name)
    const messages = yield* sendMessages(q, name, offered)
    const started = performance.now()
    // the first worker: every message waits `ack-delay-ms` between its commit and its acknowledgement, and
    // the kill lands right after a third of the messages committed, inside such a window
    // (100 ms: wide enough that the kill lands inside it even when this process reads the line late)
    const first = yield* startWorker(q, `${name}_a`, [
      "--concurrency",
      "8",
      "--handle-ms",
      "5",
      "--ack-delay-ms",
      "100"
    ])
    const killAt = Math.ceil(offered / 3)
    let committed = first.lines.filter((line) => line.startsWith("committed ")).length
    let killedOn: string | undefined
    first.onLine((line) => {
      if (killedOn !== undefined || !line.startsWith("committed ")) return
      if (++committed >= killAt) {
        killedOn = line.slice("committed ".length)
        first.child.kill("SIGKILL")
      }
    })
    yield* first.awaitExit.pipe(Effect.timeout("45 seconds"))
    if (killedOn === undefined) {
      return yield* Effect.fail(new Error(`${first.label} exited before the kill\n${first.output()}`))
    }

    const second = yield* startWorker(q, `${name}_b`, ["--concurrency", "4"])
    yield* waitUntil(`${kind} queue drained by the second worker`, q.drained, { within: "45 seconds" })
    const millis = performance.now() - started

    const counts = yield* q.effectCounts
    const dead = yield* q.deadLettered
    let lost = 0
    let duplicated = 0
    for (const m of messages) {
      const n = counts.get(m.id) ?? 0
      if (n === 0) lost++
      if (n > 1) duplicated++
    }
    const skipped = countLines([second], "skipped")
    const firstCommitted = countLines([first], "committed").size
    const row: FaultRow = {
      fault: `consumer SIGKILLed mid-batch, a second one finishes (${kind === "pg" ? "PgQueue" : "RedisStreamQueue"})`,
      offered,
      lost,
      duplicated,
      notes: `killed after ${firstCommitted} commits, ${skipped.size} of them not yet acknowledged: redelivered, ` +
        `skipped by the second worker${skipped.has(killedOn) ? " (incl. the one the kill followed)" : ""}; ` +
        `${dead.length} dead-lettered; ${(millis / 1000).toFixed(1)} s`,
      // the kill must have hit the window between a commit and its acknowledgement, and nothing may be dead
      ok: skipped.size > 0 && dead.length === 0
    }
    return [row]
  }).pipe(Effect.scoped, Effect.provide(Layer.orDie(adminLayer())), Effect.runPromise)
}

export const consumerKillPg: Fault = { name: "consumer-kill-pg", run: () => run("pg") }
export const consumerKillRedis: Fault = { name: "consumer-kill-redis", run: () => run("redis") }
