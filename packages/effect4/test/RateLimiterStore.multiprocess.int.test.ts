/**
 * Three OS processes sharing one token bucket through `RateLimiterStore/Sql`, over PostgreSQL (`DATABASE_URL`)
 * and over one SQLite file: the proof that the store's decisions are atomic across processes, not only across
 * fibers — together they never admit more than the bucket holds plus what it refilled. Each process is a plain
 * `node` running ./support/rateLimiterWorker.ts on this package's sources. (The contract's
 * multiprocess.int.test.ts asserts the same bound through three `serve` processes.)
 *
 * Real processes, so real time: every wait is for a line a process prints, with a generous cap; the only time
 * in the assertions is the wall-clock span the processes themselves report around their decisions.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { databaseUrl, dropPgTables, freshName, PgLive } from "./support/pg.js"
import { available, describePg } from "./support/services.js"

const pkg = fileURLToPath(new URL("..", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "effect-resilience-rl-mp-"))
const children = new Set<ChildProcess>()
const pgTables: Array<string> = []
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
  if (!available.postgres || pgTables.length === 0) return
  await Effect.runPromise(dropPgTables(pgTables).pipe(Effect.provide(PgLive)))
})

interface Worker {
  readonly child: ChildProcess
  /** The next line the process prints (stdout), or a failure when it exits first or stays silent for 60 s. */
  readonly next: Effect.Effect<string, Error>
  readonly send: (text: string) => void
}

/** Starts ./support/rateLimiterWorker.ts in a process of its own; it is killed when the scope closes. */
const worker = (args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync((): Worker => {
      const child = spawn(process.execPath, [
        "--no-warnings",
        "--experimental-transform-types",
        "--import",
        "./scripts/tsResolve.mjs",
        "test/support/rateLimiterWorker.ts",
        ...args
      ], { cwd: pkg, stdio: ["pipe", "pipe", "pipe"] })
      children.add(child)
      let stderr = ""
      child.stderr!.on("data", (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-4000)))
      const lines: Array<string> = []
      const waiting: Array<(line: string | Error) => void> = []
      let ended: Error | undefined
      createInterface({ input: child.stdout! }).on("line", (line) => {
        const waiter = waiting.shift()
        if (waiter) waiter(line)
        else lines.push(line)
      })
      child.on("exit", (code, signal) => {
        ended = new Error(`the process exited (${signal ?? code}) before printing a line: ${stderr}`)
        for (const waiter of waiting.splice(0)) waiter(ended)
      })
      const next = Effect.callback<string, Error>((resume) => {
        const answer = (line: string | Error) =>
          resume(typeof line === "string" ? Effect.succeed(line) : Effect.fail(line))
        if (lines.length > 0) return answer(lines.shift()!)
        if (ended !== undefined) return answer(ended)
        waiting.push(answer)
      }).pipe(
        Effect.timeoutOrElse({
          duration: "60 seconds",
          orElse: () => Effect.fail(new Error(`no line within 60 s: ${stderr}`))
        })
      )
      return { child, next, send: (text) => child.stdin!.write(`${text}\n`) }
    }),
    (w) => Effect.sync(() => w.child.kill("SIGKILL"))
  )

interface Report {
  readonly pid: number
  readonly admitted: number
  readonly denied: number
  readonly outages: number
  /** `Date.now()` just before the process's first decision and just after its last. */
  readonly first: number
  readonly last: number
}

const capacity = 20
const rate = 10
const windowMillis = 2_000

/**
 * Three processes, `fibers` fibers each, hammering one fresh key of one fresh table for `windowMillis`: the
 * total admitted stays within capacity + rate × T, T from the first decision to the last across processes.
 */
const shareOneBucket = (dialect: "pg" | "sqlite", target: string, table: string) =>
  Effect.gen(function*() {
    const name = `mp-${randomUUID()}`
    const key = `key-${randomUUID()}`
    // each process migrates the table itself, at the same time as the others
    const workers = yield* Effect.all(
      Array.from({ length: 3 }, () =>
        worker([dialect, target, table, name, key, String(capacity), String(rate), String(windowMillis), "4"])),
      { concurrency: "unbounded" }
    )
    for (const w of workers) {
      expect(yield* w.next).toBe("ready")
    }
    for (const w of workers) {
      w.send("go")
    }
    const reports = (yield* Effect.forEach(workers, (w) =>
      w.next, { concurrency: "unbounded" })).map(
        (line) => JSON.parse(line) as Report
      )
    // every decision's `nowMillis` lies between some process's `first` and some process's `last`
    const seconds = (Math.max(...reports.map((r) => r.last)) - Math.min(...reports.map((r) => r.first))) / 1000
    const admitted = reports.reduce((n, r) => n + r.admitted, 0)
    const denied = reports.reduce((n, r) => n + r.denied, 0)
    console.log(
      `[rate limiter multiprocess ${dialect}] admitted ${reports.map((r) => r.admitted).join("+")} = ${admitted}` +
        ` (bound ${(capacity + rate * seconds).toFixed(1)} over ${seconds.toFixed(2)} s), denied ${denied}`
    )
    // a slow database is slow, not down: not one decision was an outage (which would deny, hiding nothing)
    expect(reports.map((r) => r.outages)).toEqual([0, 0, 0])
    // the bucket really ran dry: the processes asked for more than it had
    expect(denied).toBeGreaterThan(0)
    // never more than the bucket holds plus what it refilled while they asked (+1: each decision
    // reckons the refill from its own process's clock, read before its statement, as in the Effect 3 test)
    expect(admitted).toBeLessThanOrEqual(capacity + rate * seconds + 1)
    // (and at least the burst it started with: the store does not deny what it has)
    expect(admitted).toBeGreaterThanOrEqual(capacity)
    // and the tokens went to all of them, not to one process holding the row
    for (const r of reports) expect(r.admitted).toBeGreaterThan(0)
  }).pipe(Effect.scoped)

describePg("three processes sharing a token bucket in PostgreSQL (RateLimiterStore/Sql)", () => {
  it.live("admit at most capacity + rate × elapsed between them, some to each", () => {
    const table = freshName("rl_mp")
    pgTables.push(table)
    return shareOneBucket("pg", databaseUrl, table)
  }, 120_000)
})

describe("three processes sharing a token bucket in one SQLite file (RateLimiterStore/Sql)", () => {
  it.live(
    "admit at most capacity + rate × elapsed between them, some to each",
    () => shareOneBucket("sqlite", join(dir, `rl-${randomUUID()}.db`), "rl_mp"),
    120_000
  )
})
