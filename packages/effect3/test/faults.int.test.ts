/**
 * The fault suite's own faults (examples/faults/redisKill.ts, skew.ts), run in this process as `npm run
 * faults` runs them: real serve processes and a private redis-server each, nothing shared with other tests.
 * Each must lose nothing, duplicate nothing and keep its bound. The Redis Cluster failover faults run in
 * test/redisFailover.int.test.ts, the PostgreSQL ones in test/faults.pg.int.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { FaultRow } from "../../../examples/faults/fault.js"
import { run as redisKill } from "../../../examples/faults/redisKill.js"
import { run as clockSkew } from "../../../examples/faults/skew.js"
import { failed, faults, table } from "../examples/faults.js"
import { survived } from "./support/faultRows.js"

const redisServer = spawnSync(process.env["REDIS_SERVER"] ?? "redis-server", ["--version"]).status === 0
const inCI = process.env["CI"] === "true" || process.env["CI"] === "1"

describe.skipIf(!redisServer && !inCI)("fault suite (redis-server of its own)", () => {
  it("redis-kill: Redis SIGKILLed and restarted under 3 serve processes and 1,000 keyed POSTs", async () => {
    const rows = await redisKill()
    survived(rows)
    expect(rows[0]!.offered).toBe(1000)
    expect(rows[0]!.notes).toMatch(/503×[1-9]/) // the outage was seen
  }, 180_000)

  it("clock-skew: 2 processes sharing a limiter, one 500 ms ahead, admit at most C + R·(T + skew)", async () => {
    survived(await clockSkew())
  }, 120_000)
})

describe("npm run faults (the runner)", () => {
  it("fails a row that lost, duplicated or broke its bound; prints one aligned row each", () => {
    const row: FaultRow = { fault: "f", offered: 10, lost: 0, duplicated: 0, notes: "n" }
    expect(failed(row)).toBe(false)
    expect(failed({ ...row, ok: true })).toBe(false)
    expect(failed({ ...row, lost: 1 })).toBe(true)
    expect(failed({ ...row, duplicated: 1 })).toBe(true)
    expect(failed({ ...row, ok: false })).toBe(true)
    const lines = table([row, { ...row, fault: "a longer name", offered: 1000, duplicated: 2 }]).split("\n")
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(/^fault\s+offered\s+lost\s+duplicated\s+ok\s+notes$/)
    const ok = lines[0]!.indexOf(" ok ") + 1
    expect([lines[2]!.slice(ok, ok + 4), lines[3]!.slice(ok, ok + 4)]).toEqual(["ok  ", "FAIL"])
    expect(faults.map((f) => f.name)).toEqual(
      expect.arrayContaining(["redis-kill", "redis-failover", "redis-replica-lag", "clock-skew"])
    )
  })

  it("an unknown fault or option exits 2 with the names of the faults", () => {
    const root = fileURLToPath(new URL("..", import.meta.url))
    const result = spawnSync(process.execPath, ["--import", "tsx", "examples/faults.ts", "--only", "nope"], {
      cwd: root,
      encoding: "utf8"
    })
    expect(result.status).toBe(2)
    expect(result.stderr).toMatch(/unknown fault nope[\s\S]*faults: redis-kill, .*clock-skew/)
  })
})
