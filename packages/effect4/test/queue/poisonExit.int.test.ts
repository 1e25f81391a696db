/**
 * Issue 31: a message that kills its process must not take healthy messages with it. Real processes: a worker
 * (this edition's examples/faults/consumerWorker.ts, concurrency 2, `maxReceiveCount` 3) that a supervisor in this test starts
 * again whenever it dies, 40 messages of which the first calls `process.exit(1)` (examples/faults/poisonExit.ts).
 */
import { expect, it } from "@effect/vitest"
import { figures, row } from "../../../../examples/faults/poisonExitReport.js"
import { observe } from "../../examples/faults/poisonExit.js"
import { describeWith } from "../support/services.js"

for (const kind of ["pg", "redis"] as const) {
  describeWith(
    kind === "pg" ? ["postgres"] : ["postgres", "redis"],
    `a poison message that kills its process (${kind === "pg" ? "PgQueue" : "RedisStreamQueue"}, Effect 4)`,
    () => {
      it("is dead-lettered after maxReceiveCount crashes of its own; no healthy message is", async () => {
        const run = await observe(kind)
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
