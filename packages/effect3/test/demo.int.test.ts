import { HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Duration } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { defaultSeed, parseArgs } from "../../../examples/demo/args.js"
import { type Attempt, attemptOf, faultFor, rates } from "../examples/demo/faults.js"
import { describe as inWords, footer, table } from "../examples/demo/report.js"
import { assignOrders, orderRef, type Summary } from "../examples/demo/scenario.js"
import { CircuitBreaker, HttpErrors, Retry } from "../src/index.js"

const root = fileURLToPath(new URL("..", import.meta.url))

interface Exited {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the demo's program to its end (it always ends: the cap only bounds a hang). */
const runDemo = (args: ReadonlyArray<string>) =>
  new Promise<Exited>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/demo.ts", ...args], { cwd: root })
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

/** Every attempt of a `--quick` run's orders (up to 8 attempts each), as the network names them. */
const quickAttempts = (clients = 10, orders = 60): Array<Attempt> =>
  assignOrders(orders, clients).flatMap((refs, client) =>
    refs.flatMap((order) => Array.from({ length: 8 }, (_, i) => ({ client, order, attempt: i + 1 })))
  )

describe("the demo's fault pattern", () => {
  it("is a pure function of the seed and the request: the same answers in any order, on any call", () => {
    const attempts = quickAttempts()
    const forward = attempts.map((a) => faultFor(defaultSeed, a))
    const backward = [...attempts].reverse().map((a) => faultFor(defaultSeed, { ...a })).reverse()
    expect(backward).toEqual(forward)
    // interleaving other seeds' and requests' look-ups changes nothing
    const interleaved = attempts.map((a, i) => {
      faultFor(i, { ...a, attempt: a.attempt + 1 })
      return faultFor(defaultSeed, a)
    })
    expect(interleaved).toEqual(forward)
  })

  it("depends on the seed, the client, the order and the attempt", () => {
    const attempts = quickAttempts()
    const pattern = (f: (a: Attempt) => Attempt, seed = defaultSeed) => attempts.map((a) => faultFor(seed, f(a)))
    const base = pattern((a) => a)
    expect(pattern((a) => a, defaultSeed + 1)).not.toEqual(base)
    expect(pattern((a) => ({ ...a, client: a.client + 1 }))).not.toEqual(base)
    expect(pattern((a) => ({ ...a, order: `${a.order}x` }))).not.toEqual(base)
    expect(pattern((a) => ({ ...a, attempt: a.attempt + 1 }))).not.toEqual(base)
  })

  it("meets each fault at about its rate", () => {
    const counts = { none: 0, "lost-response": 0, unavailable: 0, slow: 0 }
    const n = 40_000
    for (let i = 0; i < n; i++) counts[faultFor(7, { client: i % 20, order: orderRef(i), attempt: 1 + (i % 3) })]++
    expect(Math.abs(counts["lost-response"] / n - rates.lostResponse)).toBeLessThan(0.01)
    expect(Math.abs(counts.unavailable / n - rates.unavailable)).toBeLessThan(0.01)
    expect(Math.abs(counts.slow / n - rates.slow)).toBeLessThan(0.01)
  })

  it("with the default seed, --quick has first answers lost after the commit whose retry meets no fault", () => {
    // the raw material of the naive client's duplicates, fixed by the seed alone
    const material = assignOrders(60, 10).flatMap((refs, client) =>
      refs.filter((order) =>
        faultFor(defaultSeed, { client, order, attempt: 1 }) === "lost-response" &&
        faultFor(defaultSeed, { client, order, attempt: 2 }) === "none"
      )
    )
    expect(material.length).toBeGreaterThanOrEqual(3)
  })

  it("reads the request's identity back from the headers the client sets", () => {
    expect(attemptOf({ "x-demo-client": "3", "x-demo-order": "order-0004", "x-demo-attempt": "2" }))
      .toEqual({ client: 3, order: "order-0004", attempt: 2 })
    expect(attemptOf({ "x-demo-order": "order-0004" })).toBeUndefined()
  })

  it("gives every order to exactly one client, in a fixed order", () => {
    const perClient = assignOrders(25, 4)
    expect(perClient.map((refs) => refs.length)).toEqual([7, 6, 6, 6])
    expect(perClient[1]!.slice(0, 2)).toEqual([orderRef(1), orderRef(5)])
    expect(perClient.flat().sort()).toEqual(Array.from({ length: 25 }, (_, i) => orderRef(i)))
    expect(assignOrders(2, 5).flat()).toEqual([orderRef(0), orderRef(1)])
  })
})

describe("the demo's command line", () => {
  it("has defaults, and smaller ones with --quick", () => {
    expect(parseArgs([])).toEqual({
      _tag: "Run",
      args: { seed: 42, orders: 200, clients: 20, quick: false, json: false }
    })
    expect(parseArgs(["--quick", "--json", "--seed", "-7"])).toEqual({
      _tag: "Run",
      args: { seed: -7, orders: 60, clients: 10, quick: true, json: true }
    })
  })

  it("refuses what it does not know instead of ignoring it", () => {
    const invalid = (argv: Array<string>) => {
      const parsed = parseArgs(argv)
      return parsed._tag === "Invalid" ? parsed.message : `accepted: ${JSON.stringify(parsed)}`
    }
    expect(invalid(["--verbose"])).toBe("unknown option --verbose")
    expect(invalid(["-q"])).toBe("unknown option -q")
    expect(invalid(["quick"])).toBe("unexpected argument quick")
    expect(invalid(["--seed"])).toBe("--seed needs a value")
    expect(invalid(["--seed", "--quick"])).toBe("--seed needs a value")
    expect(invalid(["--seed", "1.5"])).toMatch(/^--seed needs an integer/)
    expect(invalid(["--orders", "0"])).toMatch(/^--orders needs an integer from 1/)
    expect(invalid(["--clients", "1e3"])).toMatch(/^--clients needs an integer/)
    expect(invalid(["--quick", "--quick"])).toBe("--quick given twice")
    expect(parseArgs(["--orders", "5", "--help"])._tag).toBe("Help")
  })
})

const summary = (overrides: Partial<Summary> = {}): Summary => ({
  logical: 60,
  attempts: 75,
  retries: 15,
  replays: 0,
  status429: 0,
  honoured429: 0,
  breakerOpenings: 0,
  injected: { lostAfterCommit: 7, lost: 7, unavailable: 7, slow: 1 },
  created: 60,
  duplicates: 0,
  lost: 0,
  gaveUp: 0,
  gaveUpButCreated: 0,
  wallMs: 2000,
  gaveUpReasons: {},
  ...overrides
})

describe("the demo's report", () => {
  it("claims duplicates only when there are some, with their number", () => {
    const withDuplicates = footer(summary({ duplicates: 7, created: 67 }), summary({ replays: 7 }))
    expect(withDuplicates).toContain("naive: 7 duplicate orders")
    expect(withDuplicates).toContain("resilient: no duplicates, nothing lost")
    expect(withDuplicates).toContain("answered 7 retries with the stored response")

    const none = footer(summary(), summary())
    expect(none).not.toMatch(/duplicate order/)
    expect(none).toContain("naive: no duplicates this time")

    const nothingLost = footer(
      summary({ injected: { lostAfterCommit: 0, lost: 0, unavailable: 0, slow: 0 } }),
      summary()
    )
    expect(nothingLost).toContain("the network lost no answer")

    const broken = footer(summary({ duplicates: 1 }), summary({ duplicates: 2, lost: 1 }))
    expect(broken).not.toContain("no duplicates")
    expect(broken).not.toContain("nothing lost")
    expect(broken).toContain("resilient: 2 duplicate orders")
    expect(broken).toContain("resilient: 1 order reported created but missing")
  })

  it("mentions the breaker only when it opened, and says what that meant", () => {
    expect(footer(summary(), summary())).not.toMatch(/breaker/)
    expect(footer(summary(), summary({ breakerOpenings: 2 }))).toMatch(/breaker opened 2 times[^]*failed fast/)
    expect(table(summary(), summary())).not.toMatch(/breaker/)
  })

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
      { _tag: "TimeoutException" },
      { _tag: "RequestError" }
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

describe("npm run demo", () => {
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
