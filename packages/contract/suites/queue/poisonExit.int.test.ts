/**
 * Issue 31: a message that kills its process must not take healthy messages with it. Real processes: a worker
 * (each edition's own examples/faults/consumerWorker.ts, concurrency 2, `maxReceiveCount` 3) that a supervisor in
 * this test starts again whenever it dies, 40 messages of which the first calls `process.exit(1)` (each edition's
 * examples/faults/poisonExit.ts, through the adapter's `observePoisonExit`).
 */
import {
  edition,
  observePoisonExit,
  poisonExitFigures as figures,
  poisonExitRow as row,
  queueDescribeWith
} from "#edition"
import { expect, it } from "@effect/vitest"

for (const kind of ["pg", "redis"] as const) {
  queueDescribeWith(
    kind === "pg" ? ["postgres"] : ["postgres", "redis"],
    `a poison message that kills its process (${kind === "pg" ? "PgQueue" : "RedisStreamQueue"}, ${edition})`,
    () => {
      it("is dead-lettered after maxReceiveCount crashes of its own; no healthy message is", async () => {
        const run = await observePoisonExit(kind)
        const f = figures(run)
        // the figures, whatever the verdict (docs/queues.md quotes them)
        console.log(row(run).notes)
        expect(f.healthyDeadLettered).toEqual([])
        // none of them ever failed: no crash may be charged to them
        expect(f.maxHealthyReceiveCount).toBe(1)
        expect(f.poisonDeadLettered).toBe(true)
        // its crashes beside another handler are not its own: at most one of them (the first) in this run
        expect(f.crashes).toBeGreaterThanOrEqual(run.maxReceiveCount)
        expect(f.crashes).toBeLessThanOrEqual(run.maxReceiveCount + 1)
        expect([f.lost, f.duplicated]).toEqual([0, 0])
        const poison = run.deadLetters.find((d) => d.id === run.poisonId)!
        expect(poison.receiveCount).toBe(run.maxReceiveCount + 1)
      }, 180_000)
    }
  )
}
