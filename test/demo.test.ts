import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

describe("npm run demo", () => {
  it("completes in --quick mode: the resilient client creates every order exactly once", async () => {
    const output = await new Promise<string>((resolve, reject) =>
      execFile(
        `${root}/node_modules/.bin/tsx`,
        ["examples/demo.ts", "--quick", "--json", "--seed", "7"],
        { cwd: root, timeout: 60_000 },
        (error, stdout) => error === null ? resolve(stdout) : reject(error)
      )
    )
    const summary = JSON.parse(output.trim().split("\n").at(-1)!)
    for (const side of [summary.naive, summary.resilient]) {
      expect(side.logical).toBe(60)
      expect(side.attempts).toBeGreaterThanOrEqual(60)
      for (const field of ["duplicates", "lost", "created"]) expect(typeof side[field]).toBe("number")
    }
    expect(summary.resilient.duplicates).toBe(0)
    expect(summary.resilient.lost).toBe(0)
    // every order the resilient client did not give up on exists exactly once
    expect(summary.resilient.created).toBe(60 - summary.resilient.gaveUp + summary.resilient.gaveUpButCreated)
  }, 90_000)
})
