/**
 * Several OS processes sharing one store: the proof that claims (and a token bucket's admissions) are atomic across
 * processes, not only across fibers.
 *
 * - One SQLite file shared through `IdempotencyStore/Sql` over the edition's SQLite client, each process a plain
 *   `node` running the edition's test/support/sqliteClaimer.ts (the adapter's `sqliteClaimer` says how).
 * - Three `npm run serve` processes (examples/serve.ts) sharing PostgreSQL or Redis (DATABASE_URL, REDIS_URL; in
 *   CI a missing service fails here), spoken to over HTTP only.
 *
 * Real processes, so real time: every wait is for a line a process prints or an answer, with a generous cap.
 */
import {
  type Answer,
  callback,
  describeWith,
  edition,
  eventually,
  fork,
  orderCount,
  postOrder,
  requestServe,
  scopedLive,
  sqliteClaimer,
  sqliteLayer,
  startServe
} from "#edition"
import { afterAll, describe, expect } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option } from "effect"
import { IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"

const dir = mkdtempSync(join(tmpdir(), `effect-resilience-${edition}-mp-`))
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
      const claimer = sqliteClaimer(args)
      const child = spawn(claimer.command, claimer.args, { cwd: claimer.cwd, stdio: ["pipe", "pipe", "pipe"] })
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
      const next = callback<string, Error>((resume) => {
        const answer = (line: string | Error) =>
          resume(typeof line === "string" ? Effect.succeed(line) : Effect.fail(line))
        if (lines.length > 0) return answer(lines.shift()!)
        if (ended !== undefined) return answer(ended)
        waiting.push(answer)
      }).pipe(
        Effect.timeoutOption("60 seconds"),
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new Error(`no line within 60 s: ${stderr}`)),
          onSome: Effect.succeed
        }))
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

/** Claims `key` once, with the store in context. */
const claimOnce = (key: string) =>
  Effect.gen(function*() {
    return yield* (yield* IdempotencyStore.IdempotencyStore).claim(request(key))
  })

/** The store of this test process on the shared file. */
const storeOn = (filename: string, table: string) =>
  IdempotencyStoreSql.layer({ table, cleanup: false }).pipe(Layer.provide(sqliteLayer({ filename })))

describe("processes sharing one SQLite file", () => {
  scopedLive(
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
        const replays = yield* Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          return yield* Effect.forEach([...winners.keys()], (key) => store.claim(request(key)))
        }).pipe(Effect.provide(storeOn(filename, "idem_mp")))
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

  scopedLive(
    "a process SIGKILLed while it holds a claim: after its lease another process completes it, once",
    () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const holder = yield* worker(["hold", filename, "idem_kill", "order-1", "1500"])
        expect(yield* holder.next).toBe("held")
        // while the holder lives, the key is in progress for everyone else
        const before = yield* claimOnce("order-1").pipe(
          Effect.provide(storeOn(filename, "idem_kill"))
        )
        expect(before._tag).toBe("InProgress")
        holder.child.kill("SIGKILL")
        // another process retries until the dead owner's lease ran out, takes the claim over and completes it
        const taker = yield* worker(["takeover", filename, "idem_kill", "order-1"])
        expect(yield* taker.next).toBe("done")
        const after = yield* claimOnce("order-1").pipe(
          Effect.provide(storeOn(filename, "idem_kill"))
        )
        expect(after._tag === "Completed" && new TextDecoder().decode(after.response.body)).toBe(
          String(taker.child.pid)
        )
      }).pipe(Effect.scoped),
    120_000
  )
})

// Several `npm run serve` processes sharing one store: the proof that claims and buckets are really shared.

const startMany = (n: number, args: ReadonlyArray<string>) =>
  Effect.all(Array.from({ length: n }, () => startServe(args)), { concurrency: n })

const totalCount = (urls: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(urls, (url) => orderCount(url), { concurrency: urls.length }),
    (counts) => counts.reduce((a, b) => a + b, 0)
  )

for (const store of ["redis", "postgres"] as const) {
  describeWith([store], `three serve processes sharing ${store}`, () => {
    scopedLive(
      "100 concurrent POSTs with one key, spread across them, create exactly one order",
      () =>
        Effect.gen(function*() {
          const servers = yield* startMany(3, ["--store", store])
          const urls = servers.map((s) => s.url)
          const before = yield* totalCount(urls)
          const key = `mp-${randomUUID()}`
          const answers = yield* Effect.forEach(
            Array.from({ length: 100 }, (_, i) => urls[i % 3]!),
            (url) => postOrder(url, { key, body: { sku: "BOOK-1", qty: 1 } }),
            { concurrency: "unbounded" }
          )
          expect((yield* totalCount(urls)) - before).toBe(1)
          const statuses = new Set(answers.map((a) => a.status))
          for (const status of statuses) expect([201, 409]).toContain(status)
          const created = answers.filter((a) => a.status === 201)
          expect(created.length).toBeGreaterThanOrEqual(1)
          expect(new Set(created.map((a) => JSON.parse(a.body).id)).size).toBe(1)
        }).pipe(Effect.scoped),
      60_000
    )

    scopedLive(
      "a process killed while holding a claim: after the lease, a retry elsewhere completes exactly once",
      () =>
        Effect.gen(function*() {
          const servers = yield* startMany(3, ["--store", store, "--lease", "1500"])
          const key = `kill-${randomUUID()}`
          const order = { key, query: "?delayMs=4000", body: { sku: "BOOK-2" } }
          const before = yield* totalCount(servers.map((s) => s.url))
          // the same request to two processes at once: one claims the key (and sleeps 4 s), the other gets 409
          const [first, second] = yield* Effect.all([
            fork(postOrder(servers[0]!.url, order)),
            fork(postOrder(servers[1]!.url, order))
          ])
          const loser = yield* Effect.raceFirst(
            Effect.as(Effect.filterOrFail(Fiber.join(first), (a) => a.status === 409), 0),
            Effect.as(Effect.filterOrFail(Fiber.join(second), (a) => a.status === 409), 1)
          )
          const owner = servers[1 - loser]!
          const b = servers[loser]!
          const c = servers[2]!
          owner.child.kill("SIGKILL")
          yield* Effect.exit(Fiber.join(loser === 0 ? second : first))
          // retry on B until the dead owner's lease has run out and B takes the claim over
          let retry: Answer | undefined
          yield* eventually(
            Effect.map(postOrder(b.url, order), (answer) => (retry = answer).status !== 409),
            { every: "100 millis" }
          )
          expect(retry?.status).toBe(201)
          const replay = yield* postOrder(c.url, order)
          expect(replay.status).toBe(201)
          expect(replay.body).toBe(retry?.body)
          expect(replay.headers.get("idempotent-replayed")).toBe("true")
          expect((yield* totalCount([b.url, c.url])) - before).toBe(1)
        }).pipe(Effect.scoped),
      60_000
    )
  })
}

// the Redis script and the SQL upsert: one atomic decision per request, whichever process makes it
for (const store of ["redis", "postgres"] as const) {
  describeWith([store], `three serve processes sharing a token bucket in ${store}`, () => {
    scopedLive(
      "admit at most capacity + rate × elapsed, and all of it while they are kept busy",
      () =>
        Effect.gen(function*() {
          const capacity = 50
          const rate = 10
          const client = `bucket-${randomUUID()}` // a fresh bucket: a new customer, authenticated by its API key
          const servers = yield* startMany(3, [
            "--store",
            store,
            "--rate",
            `${capacity}:${rate}`,
            "--api-keys",
            `${client}=${client}`
          ])
          const urls = servers.map((s) => s.url)
          // Every decision happens between a request's sending and its answer, so the times the client
          // sees bound the bucket's own: its first decision came no later than the first answer, the last
          // admission no later than its answer, and a denial no earlier than its request was sent.
          const started = performance.now()
          const until = started + 3_000
          let admitted = 0
          let denied = 0
          let firstAnswer = Infinity
          let lastAdmittedAnswer = -Infinity
          let lastDeniedSent = -Infinity
          const worker = (url: string) =>
            Effect.gen(function*() {
              for (let i = 0; i < 2_000 && performance.now() < until; i++) {
                const sent = performance.now()
                const answer = yield* requestServe(`${url}/orders`, {
                  method: "POST",
                  headers: { "content-type": "application/json", "x-api-key": client, "idempotency-key": randomUUID() },
                  body: "{}"
                })
                const answered = performance.now()
                firstAnswer = Math.min(firstAnswer, answered)
                if (answer.status === 201) {
                  admitted++
                  lastAdmittedAnswer = Math.max(lastAdmittedAnswer, answered)
                } else if (answer.status === 429) {
                  denied++
                  lastDeniedSent = Math.max(lastDeniedSent, sent)
                } else throw new Error(`unexpected status ${answer.status}: ${answer.body.slice(0, 300)}`)
              }
            })
          yield* Effect.forEach(Array.from({ length: 24 }, (_, i) => urls[i % 3]!), worker, {
            concurrency: "unbounded"
          })
          expect(denied).toBeGreaterThan(0)
          // never more than the bucket holds plus what it refilled (one token of rounding)
          expect(admitted).toBeLessThanOrEqual(capacity + rate * (lastAdmittedAnswer - started) / 1000 + 1)
          // 24 clients keep asking, so the bucket never idles the 5 s it takes to fill up and lose refills:
          // at the last denial every token made since the first decision had been handed out
          expect(admitted).toBeGreaterThanOrEqual(capacity + rate * (lastDeniedSent - firstAnswer) / 1000 - 1)
        }).pipe(Effect.scoped),
      60_000
    )
  })
}
