/**
 * The Effect 4 edition's `npm run demo` (examples/demo.ts): the story it tells, its command line, and how it puts
 * this edition's errors in words. The fault pattern, the command line's parsing and the report's claims are shared
 * with the Effect 3 edition and tested there (test/demo.int.test.ts in the repository's root).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Duration } from "effect"
import { HttpClientError, HttpClientRequest } from "effect/http"
import { spawn } from "node:child_process"
import { defaultSeed } from "../../../examples/demo/args.js"
import { describe as inWords } from "../examples/demo/report.js"
import { CircuitBreaker, HttpErrors, Retry } from "../src/index.js"
import { exampleArgs, pkg } from "./support/serveProcess.js"

interface Exited {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the demo's program to its end (it always ends: the cap only bounds a hang). */
const runDemo = (args: ReadonlyArray<string>) =>
  new Promise<Exited>((resolve, reject) => {
    const child = spawn(process.execPath, exampleArgs("examples/demo.ts", args), { cwd: pkg })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const cap = setTimeout(() => child.kill("SIGKILL"), 240_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(cap)
      resolve({ code, stdout, stderr })
    })
  })

describe("the demo's report on Effect 4", () => {
  it("names give-up reasons in words, not class names", () => {
    const request = HttpClientRequest.post("http://127.0.0.1/orders")
    const reasons = [
      new Retry.RetriesExhausted({
        attempts: 8,
        reason: "attempts",
        last: new HttpErrors.NoResponse({ reason: "reset", request, cause: null })
      }),
      new Retry.RetriesExhausted({
        attempts: 3,
        reason: "deadline",
        last: new HttpErrors.NoResponse({ reason: "read-timeout", request, cause: null })
      }),
      new Retry.RetriesExhausted({
        attempts: 2,
        reason: "budget",
        last: new HttpErrors.ConnectFailed({ reason: "refused", request, cause: null })
      }),
      new CircuitBreaker.CircuitOpen({ retryAfter: Duration.seconds(1) }),
      new Cause.TimeoutError(),
      new HttpClientError.HttpClientError({ reason: new HttpClientError.TransportError({ request }) })
    ].map(inWords)
    expect(reasons).toEqual([
      "the connection broke before an answer arrived; gave up after 8 attempts",
      "no answer within the 1 s attempt timeout; the 20 s deadline left no time for another attempt",
      "could not connect (refused); the retry budget was spent (too many retries across all orders)",
      "the circuit breaker was open: failed fast without calling the service",
      "no answer within the 1 s read timeout",
      "the connection broke before an answer arrived"
    ])
    for (const reason of reasons) expect(reason).not.toMatch(/[A-Z][a-z]+[A-Z]/) // no CamelCase class names
  })
})

describe("npm run demo (Effect 4)", () => {
  it(
    "tells the story with the default seed in --quick mode: naive duplicates, resilient none, nothing lost",
    async () => {
      const { code, stderr, stdout } = await runDemo(["--quick", "--json"])
      expect(code, stderr).toBe(0)
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!)
      expect(result.seed).toBe(defaultSeed)
      const { naive, resilient } = result
      for (const side of [naive, resilient]) {
        expect(side.logical).toBe(60)
        expect(side.attempts).toBeGreaterThan(60)
        expect(side.lost).toBe(0)
        expect(side.injected.lostAfterCommit).toBeGreaterThan(0)
      }
      expect(naive.duplicates).toBeGreaterThan(0)
      expect(resilient.duplicates).toBe(0)
      expect(resilient.replays).toBeGreaterThan(0)
      // every order the resilient client did not give up on exists exactly once
      expect(resilient.created).toBe(60 - resilient.gaveUp + resilient.gaveUpButCreated)
    },
    300_000
  )

  it("--help prints the usage and exits 0; unknown options exit 2 with the usage", async () => {
    const [help, unknown, stray] = await Promise.all([
      runDemo(["--help"]),
      runDemo(["--quick", "--verbose"]),
      runDemo(["quick"])
    ])
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^usage: npm run demo/)
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/^unknown option --verbose\nusage: npm run demo/)
    expect(stray.code).toBe(2)
    expect(stray.stderr).toMatch(/^unexpected argument quick\n/)
  }, 240_000)
})
