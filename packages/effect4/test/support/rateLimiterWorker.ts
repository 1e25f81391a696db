/**
 * One OS process of the multi-process rate limiter tests (../RateLimiterStore.multiprocess.int.test.ts), run by
 * plain `node` on this package's sources (scripts/tsResolve.mjs): a token bucket on `RateLimiterStore/Sql` over
 * PostgreSQL or a SQLite file that other processes share. Arguments:
 * `<pg|sqlite> <url|file> <table> <name> <key> <capacity> <refillPerSecond> <millis> <fibers>`.
 *
 * Builds the store (migrating the table), prints `ready`, waits for `go` on stdin, then `fibers` fibers call
 * `tryAcquire(key)` back to back for `millis` of real time. Prints one JSON line: its pid, the decisions it
 * got, and the wall-clock times (`Date.now()`, the clock the limiter reads) just before its first decision
 * and just after its last one, so the parent can bound every decision's `nowMillis` across processes.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, Redacted } from "effect"
import { createInterface } from "node:readline"
import * as RateLimiter from "../../src/RateLimiter.js"
import * as RateLimiterStoreSql from "../../src/RateLimiterStore/Sql.js"
import * as Sqlite from "../../src/Sqlite.js"

const [dialect, target, table, name, key, capacity, rate, millis, fibers] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string
]

const line = (text: string) => Effect.sync(() => process.stdout.write(`${text}\n`))
const go = Effect.callback<void>((resume) => {
  const input = createInterface({ input: process.stdin })
  input.on("line", (l) => {
    if (l.trim() === "go") {
      input.close()
      resume(Effect.void)
    }
  })
})

const client = dialect === "pg"
  ? PgClient.layer({ url: Redacted.make(target), connectTimeout: "5 seconds", maxConnections: Number(fibers) })
  : Sqlite.layer({ filename: target, busyTimeout: "10 seconds" })

// a generous timeout: on a busy machine a slow answer is still an answer, not an outage
const StoreLive = RateLimiterStoreSql.layer({ table, cleanup: false, timeout: "10 seconds" }).pipe(
  Layer.provide(client)
)

const program = Effect.gen(function*() {
  const limiter = yield* RateLimiter.tokenBucket({
    capacity: Number(capacity),
    refillPerSecond: Number(rate),
    name
  })
  yield* line("ready")
  yield* go
  let admitted = 0
  let denied = 0
  let outages = 0
  let first = Infinity
  let last = -Infinity
  const until = (yield* Clock.currentTimeMillis) + Number(millis)
  const loop = Effect.gen(function*() {
    for (;;) {
      const before = yield* Clock.currentTimeMillis
      if (before >= until) return
      const decision = yield* limiter.tryAcquire(key)
      const after = yield* Clock.currentTimeMillis
      first = Math.min(first, before)
      last = Math.max(last, after)
      if (decision.outage) outages++
      else if (decision.allowed) admitted++
      else denied++
    }
  })
  yield* Effect.all(Array.from({ length: Number(fibers) }, () => loop), { concurrency: "unbounded", discard: true })
  yield* line(JSON.stringify({ pid: process.pid, admitted, denied, outages, first, last }))
})

Effect.runPromise(program.pipe(Effect.provide(StoreLive))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
