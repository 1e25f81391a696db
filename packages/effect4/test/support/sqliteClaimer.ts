/**
 * One OS process of the multi-process SQLite tests (../multiprocess.int.test.ts), run by plain `node` on this
 * package's sources (scripts/tsResolve.mjs): an `IdempotencyStore/Sql` over `effect-resilience/Sqlite` on a file that
 * other processes share. Arguments: `<mode> <file> <table> <keys> [concurrency|leaseMillis]`.
 *
 * - `race`: prints `ready`, waits for `go` on stdin, then claims `key-0` … `key-<keys-1>` (`concurrency` at a
 *   time); a claim it wins is completed with its pid as the body. Prints one JSON line: what it claimed, what
 *   every other answer was, and how long the claims took.
 * - `hold`: claims `<keys>` (a key name here) with a lease of `leaseMillis`, prints `held`, and never completes.
 * - `takeover`: claims `<keys>` every 20 ms until it wins, completes it with its pid, prints `done`.
 */
import { Duration, Effect, Layer } from "effect"
import { createInterface } from "node:readline"
import * as IdempotencyStore from "../../src/IdempotencyStore.js"
import * as IdempotencyStoreSql from "../../src/IdempotencyStore/Sql.js"
import * as Sqlite from "../../src/Sqlite.js"

const [mode, filename, table, keys, extra] = process.argv.slice(2) as [string, string, string, string, string?]

const request = (key: string, leaseMillis = 60_000): IdempotencyStore.ClaimRequest => ({
  scope: "multiprocess",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.millis(leaseMillis)
})
const body = new TextEncoder().encode(String(process.pid))
const complete = (store: IdempotencyStore.Store, key: string, token: string) =>
  store.complete({ scope: "multiprocess", key, token }, { status: 201, headers: {}, body }, Duration.hours(1))

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

const race = (store: IdempotencyStore.Store) =>
  Effect.gen(function*() {
    const n = Number(keys)
    yield* line("ready")
    yield* go
    const started = performance.now()
    const answers = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `key-${i}`),
      (key) =>
        Effect.flatMap(store.claim(request(key)), (answer) =>
          answer._tag === "Claimed"
            ? Effect.as(complete(store, key, answer.token), { key, tag: "Claimed" })
            : Effect.succeed({ key, tag: answer._tag })),
      { concurrency: Number(extra ?? 8) }
    )
    const millis = performance.now() - started
    const claimed = answers.filter((a) => a.tag === "Claimed").map((a) => a.key)
    const others: Record<string, number> = {}
    for (const a of answers) if (a.tag !== "Claimed") others[a.tag] = (others[a.tag] ?? 0) + 1
    yield* line(JSON.stringify({ pid: process.pid, claimed, others, millis }))
  })

const hold = (store: IdempotencyStore.Store) =>
  Effect.gen(function*() {
    const answer = yield* store.claim(request(keys, Number(extra)))
    yield* line(answer._tag === "Claimed" ? "held" : `not held: ${answer._tag}`)
    yield* Effect.never
  })

const takeover = (store: IdempotencyStore.Store) =>
  Effect.gen(function*() {
    for (;;) {
      const answer = yield* store.claim(request(keys))
      if (answer._tag === "Claimed") {
        yield* complete(store, keys, answer.token)
        return yield* line("done")
      }
      yield* Effect.sleep("20 millis")
    }
  })

const StoreLive = IdempotencyStoreSql.layer({ table, cleanup: false }).pipe(
  Layer.provide(Sqlite.layer({ filename }))
)
const modes: Record<string, (store: IdempotencyStore.Store) => Effect.Effect<void, unknown>> = { race, hold, takeover }

Effect.runPromise(IdempotencyStore.IdempotencyStore.use(modes[mode]!).pipe(Effect.provide(StoreLive))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
