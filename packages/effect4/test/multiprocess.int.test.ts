/**
 * Several OS processes sharing one SQLite file through `IdempotencyStore/Sql` over `effect-resilience/Sqlite`:
 * the proof that the embedded store's claims are atomic across processes, not only across fibers. Each process is
 * a plain `node` running ./support/sqliteClaimer.ts on this package's sources. (The Effect 3 edition's
 * test/multiprocess.int.test.ts runs `npm run serve` processes over PostgreSQL and Redis; this is the script-per-
 * process shape until the HTTP service is ported.)
 *
 * Real processes, so real time: every wait is for a line a process prints, with a generous cap.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import * as IdempotencyStoreSql from "../src/IdempotencyStore/Sql.js"
import { IdempotencyStore } from "../src/index.js"
import * as Sqlite from "../src/Sqlite.js"

const pkg = fileURLToPath(new URL("..", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "effect-resilience-mp-"))
const children = new Set<ChildProcess>()
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

interface Worker {
  readonly child: ChildProcess
  /** The next line the process prints (stdout), or a failure when it exits first or stays silent for 60 s. */
  readonly next: Effect.Effect<string, Error>
  readonly send: (text: string) => void
}

/** Starts ./support/sqliteClaimer.ts in a process of its own; it is killed when the scope closes. */
const worker = (args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync((): Worker => {
      const child = spawn(process.execPath, [
        "--no-warnings",
        "--experimental-transform-types",
        "--import",
        "./scripts/tsResolve.mjs",
        "test/support/sqliteClaimer.ts",
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

let files = 0
const freshFile = () => join(dir, `shared-${++files}.db`)

interface RaceResult {
  readonly pid: number
  readonly claimed: ReadonlyArray<string>
  readonly others: Readonly<Record<string, number>>
  readonly millis: number
}

const request = (key: string): IdempotencyStore.ClaimRequest => ({
  scope: "multiprocess",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.minutes(1)
})

/** The store of this test process on the shared file. */
const storeOn = (filename: string, table: string) =>
  IdempotencyStoreSql.layer({ table, cleanup: false }).pipe(Layer.provide(Sqlite.layer({ filename })))

describe("processes sharing one SQLite file", () => {
  it.live(
    "4 processes claiming the same 300 keys at once: each key is claimed exactly once, by one of them",
    () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const keys = 300
        // each process migrates the table itself, at the same time as the others
        const workers = yield* Effect.all(
          Array.from({ length: 4 }, () => worker(["race", filename, "idem_mp", String(keys), "8"])),
          { concurrency: "unbounded" }
        )
        for (const w of workers) expect(yield* w.next).toBe("ready")
        for (const w of workers) w.send("go")
        for (const w of workers) expect(yield* w.next).toBe("claimed")
        for (const w of workers) w.send("complete")
        const results = (yield* Effect.forEach(workers, (w) => w.next, { concurrency: "unbounded" })).map(
          (line) => JSON.parse(line) as RaceResult
        )
        const winners = new Map<string, number>()
        for (const r of results) {
          for (const key of r.claimed) {
            expect(winners.has(key)).toBe(false) // claimed by two processes: a handler would have run twice
            winners.set(key, r.pid)
          }
          // every other answer was a claim in progress or a stored response, never a failure
          expect(Object.keys(r.others).every((tag) => tag === "InProgress" || tag === "Completed")).toBe(true)
        }
        expect(winners.size).toBe(keys)
        expect(results.reduce((n, r) => n + r.claimed.length + Object.values(r.others).reduce((a, b) => a + b, 0), 0))
          .toBe(4 * keys)
        // the claims really raced: some process asked for a key while another held it, its handler unfinished (the
        // winners complete only once every process has claimed, so this holds however the processes start)
        expect(results.reduce((n, r) => n + (r.others["InProgress"] ?? 0), 0)).toBeGreaterThan(0)
        // and each key replays the response its winner stored
        const replays = yield* IdempotencyStore.IdempotencyStore.use((store) =>
          Effect.forEach([...winners.keys()], (key) => store.claim(request(key)))
        ).pipe(Effect.provide(storeOn(filename, "idem_mp")))
        replays.forEach((replay, i) => {
          const key = [...winners.keys()][i]!
          expect(replay._tag === "Completed" && new TextDecoder().decode(replay.response.body)).toBe(
            String(winners.get(key))
          )
        })
        const seconds = results.reduce((m, r) => Math.max(m, r.millis), 0) / 1000
        const won = results.map((r) => r.claimed.length).join("/")
        console.log(
          `[multiprocess] 4 processes, ${4 * keys} claims of ${keys} keys in ${seconds.toFixed(2)} s (won ${won})`
        )
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a process SIGKILLed while it holds a claim: after its lease another process completes it, once",
    () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const holder = yield* worker(["hold", filename, "idem_kill", "order-1", "1500"])
        expect(yield* holder.next).toBe("held")
        // while the holder lives, the key is in progress for everyone else
        const before = yield* IdempotencyStore.IdempotencyStore.use((store) => store.claim(request("order-1"))).pipe(
          Effect.provide(storeOn(filename, "idem_kill"))
        )
        expect(before._tag).toBe("InProgress")
        holder.child.kill("SIGKILL")
        // another process retries until the dead owner's lease ran out, takes the claim over and completes it
        const taker = yield* worker(["takeover", filename, "idem_kill", "order-1"])
        expect(yield* taker.next).toBe("done")
        const after = yield* IdempotencyStore.IdempotencyStore.use((store) => store.claim(request("order-1"))).pipe(
          Effect.provide(storeOn(filename, "idem_kill"))
        )
        expect(after._tag === "Completed" && new TextDecoder().decode(after.response.body)).toBe(
          String(taker.child.pid)
        )
      }).pipe(Effect.scoped),
    120_000
  )
})
