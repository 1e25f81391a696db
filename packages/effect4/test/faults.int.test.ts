/**
 * The Effect 4 edition's `npm run faults` (examples/faults.ts): the faults the Effect 3 edition's
 * test/faults.int.test.ts runs — redis-kill and clock-skew, the root's scenarios (plain Node) against this
 * edition's serve processes, a private redis-server each — and the runner over this edition's list. Each fault
 * must lose nothing, duplicate nothing and keep its bound. The PostgreSQL and consumer faults are in
 * ./faults.pg.int.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { run as redisKill } from "../../../examples/faults/redisKill.js"
import { failed } from "../../../examples/faults/runner.js"
import { run as clockSkew } from "../../../examples/faults/skew.js"
// imported first: it points the root's scenarios at this edition's `npm run serve`
import { faults } from "../examples/faults.js"
import { nodeArgs, pkg } from "../examples/support/node.js"

const redisServer = spawnSync(process.env["REDIS_SERVER"] ?? "redis-server", ["--version"]).status === 0
const inCI = process.env["CI"] === "true" || process.env["CI"] === "1"

describe.skipIf(!redisServer && !inCI)("fault suite on Effect 4 (redis-server of its own)", () => {
  it("redis-kill: Redis SIGKILLed and restarted under 3 serve processes and 1,000 keyed POSTs", async () => {
    const rows = await redisKill()
    // the whole row in the message when one fails: its notes say what happened
    expect(rows.filter(failed)).toEqual([])
    expect(rows[0]!.offered).toBe(1000)
    expect(rows[0]!.notes).toMatch(/503×[1-9]/) // the outage was seen
  }, 180_000)

  it("clock-skew: 2 processes sharing a limiter, one 500 ms ahead, admit at most C + R·(T + skew)", async () => {
    const rows = await clockSkew()
    expect(rows.length).toBeGreaterThan(0)
    expect(rows.filter(failed)).toEqual([])
  }, 120_000)
})

describe("npm run faults on Effect 4 (the runner)", () => {
  it("lists every fault of the Effect 3 edition, in its order; an unknown one exits 2 with their names", () => {
    expect(faults.map((f) => f.name)).toEqual([
      "redis-kill",
      "redis-failover",
      "redis-replica-lag",
      "pg-terminate-claim",
      "pg-terminate-consume",
      "consumer-kill-pg",
      "consumer-kill-redis",
      "consumer-poison-exit-pg",
      "consumer-poison-exit-redis",
      "clock-skew"
    ])
    const result = spawnSync(process.execPath, [...nodeArgs, "examples/faults.ts", "--only", "nope"], {
      cwd: pkg,
      encoding: "utf8"
    })
    expect(result.status).toBe(2)
    expect(result.stderr).toMatch(/unknown fault nope[\s\S]*faults: redis-kill, .*clock-skew/)
  })
})
