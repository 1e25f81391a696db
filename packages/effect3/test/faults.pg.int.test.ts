/**
 * The PostgreSQL and queue-consumer faults of `npm run faults` (examples/faults/pg*.ts, consumerKill.ts),
 * each run once with real processes against the machine's PostgreSQL (`DATABASE_URL`) and Redis
 * (`REDIS_URL`): every row must show nothing lost, nothing duplicated, and no broken bound. A fault takes
 * 5 to 35 s, hence the long timeouts.
 */
import { expect, it } from "@effect/vitest"
import type { Fault } from "../../../examples/faults/fault.js"
import { failed } from "../../../examples/faults/runner.js"
import { consumerKillPg, consumerKillRedis } from "../examples/faults/consumerKill.js"
import { pgTerminateClaim } from "../examples/faults/pgTerminateClaim.js"
import { pgTerminateConsume } from "../examples/faults/pgTerminateConsume.js"
import { describeWith, type Service } from "./support/services.js"

const faults: ReadonlyArray<readonly [Fault, ReadonlyArray<Service>]> = [
  [pgTerminateClaim, ["postgres"]],
  [pgTerminateConsume, ["postgres"]],
  [consumerKillPg, ["postgres"]],
  [consumerKillRedis, ["postgres", "redis"]]
]

for (const [fault, services] of faults) {
  describeWith(services, `fault ${fault.name}`, () => {
    it("survives: nothing lost, nothing duplicated", async () => {
      const rows = await fault.run()
      expect(rows.length).toBeGreaterThan(0)
      // the whole row in the message when one fails: its notes say what happened (a match of a few of its
      // fields showed only those, and a row that failed a bound said nothing of which)
      expect(rows.filter(failed)).toEqual([])
      for (const row of rows) expect(row.offered).toBeGreaterThan(0)
    }, 150_000)
  })
}
