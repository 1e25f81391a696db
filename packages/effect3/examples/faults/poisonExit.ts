/**
 * Faults "consumer-poison-exit-pg" and "consumer-poison-exit-redis" (issue 31): 40 messages, of which the first
 * ends its worker process (`process.exit(1)` as its handler starts), consumed by one worker process
 * (examples/faults/consumerWorker.ts: concurrency 2, `maxReceiveCount` 3, the idempotent consumer of
 * `Consumer/Sql`) that a supervisor — this process — starts again each time it dies, under the same consumer
 * name, until the queue is empty. The poison must be dead-lettered after `maxReceiveCount` crashes of its own,
 * and no healthy message may be: none of them ever crashed a handler. Figures: crashes, healthy messages
 * dead-lettered per crash, and how long the healthy ones waited (poisonExitReport.ts).
 */
import { Effect, Fiber, Layer } from "effect"
import type { Fault, FaultRow } from "../../../../examples/faults/fault.js"
import { type PoisonExitRun, row } from "../../../../examples/faults/poisonExitReport.js"
import { makeQueue, sendMessages, type SourceKind, spawnWorker } from "./consumerSupport.js"
import { adminLayer, type Child, runName, waitUntil } from "./pgSupport.js"

const MESSAGES = 40
const MAX_RECEIVES = 3
const VISIBILITY_MS = 3000

/** The run's observations (for the tests' own checks), and the row of `npm run faults`. */
export const observe = (kind: SourceKind): Promise<PoisonExitRun> => {
  const name = runName(`poison_${kind}`)
  return Effect.gen(function*() {
    const q = yield* makeQueue(kind, name)
    const messages = yield* sendMessages(q, name, MESSAGES, (i) => i === 0 ? "exit" : undefined)
    const poisonId = messages[0]!.id
    const committedAfter = new Map<string, number>()
    const starts = new Map<string, Array<number>>()
    const boots: Array<number> = []
    let readyAt: number | undefined
    let crashes = 0
    const workers: Array<Child> = []
    // the supervisor: one worker at a time, started again under the same name whenever it exits
    const supervise = Effect.gen(function*() {
      for (;;) {
        const child = yield* spawnWorker(
          q,
          `${name}_worker`,
          ["--concurrency", "2", "--max-receives", String(MAX_RECEIVES), "--handle-ms", "5"],
          {},
          VISIBILITY_MS
        )
        workers.push(child)
        const spawnedAt = performance.now()
        child.onLine((line) => {
          if (line === "ready") {
            readyAt ??= performance.now()
            boots.push(performance.now() - spawnedAt)
          }
          const start = /^start (\S+) (\d+)$/.exec(line)
          if (start !== null) starts.set(start[1]!, [...(starts.get(start[1]!) ?? []), Number(start[2])])
          if (!line.startsWith("committed ")) return
          const id = line.slice("committed ".length)
          if (!committedAfter.has(id)) committedAfter.set(id, performance.now())
        })
        yield* child.awaitExit
        crashes++
      }
    }).pipe(Effect.scoped)
    const supervisor = yield* Effect.fork(supervise)
    yield* waitUntil(`${kind} queue emptied by the restarted workers`, q.drained, { within: "150 seconds" })
    const endedAt = performance.now()
    yield* Fiber.interrupt(supervisor)
    const started = readyAt ?? endedAt
    const effects = yield* q.effectCounts
    const deadLetters = yield* q.source.deadLetters.list({ limit: 1000 })
    const run: PoisonExitRun = {
      kind,
      ids: messages.map((m) => m.id),
      poisonId,
      maxReceiveCount: MAX_RECEIVES,
      visibilityMs: VISIBILITY_MS,
      crashes,
      boots,
      starts,
      committedAfter: new Map([...committedAfter].map(([id, at]) => [id, Math.max(0, at - started)])),
      effects,
      deadLetters: deadLetters.map((d) => ({ id: d.id, receiveCount: d.receiveCount, reason: d.reason })),
      millis: endedAt - started
    }
    return run
  }).pipe(Effect.scoped, Effect.provide(Layer.orDie(adminLayer())), Effect.runPromise)
}

export const run = async (kind: SourceKind): Promise<ReadonlyArray<FaultRow>> => [row(await observe(kind))]

export const consumerPoisonExitPg: Fault = { name: "consumer-poison-exit-pg", run: () => run("pg") }
export const consumerPoisonExitRedis: Fault = { name: "consumer-poison-exit-redis", run: () => run("redis") }
