/**
 * One OS process of the multi-process SQLite tests (the contract's multiprocess.int.test.ts), run by `node` with
 * tsx on this package's sources: an `IdempotencyStore/Sql` over `@effect/sql-sqlite-node` on a file that other
 * processes share (the Effect 4 edition's test/support/sqliteClaimer.ts, on Effect 3). Arguments: `<mode> <file> <table> <keys> [concurrency|leaseMillis]`.
 *
 * - `race`: prints `ready`, waits for `go` on stdin, then claims `key-0` … `key-<keys-1>` (`concurrency` at a
 *   time), prints `claimed` and waits for `complete`: the claims it won are completed (with its pid as the body)
 *   only once every process has made all its claims, so the others' claims of them meet them in progress,
 *   however the processes' starts fall. Prints one JSON line: what it claimed, what every other answer was, and
 *   how long the claims took.
 * - `hold`: claims `<keys>` (a key name here) with a lease of `leaseMillis`, prints `held`, and never completes.
 * - `takeover`: claims `<keys>` every 20 ms until it wins, completes it with its pid, prints `done`.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Duration, Effect, Layer } from "effect"
import { createInterface, type Interface } from "node:readline"
import * as IdempotencyStore from "../../src/IdempotencyStore.js"
import * as IdempotencyStoreSql from "../../src/IdempotencyStore/Sql.js"

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
/** stdin's lines, read only by the modes that wait for commands (a reader keeps the process alive). */
let lines: Interface | undefined
/** Waits for the line `word` on stdin. */
const command = (word: string) =>
  Effect.async<void>((resume) => {
    const input = lines ??= createInterface({ input: process.stdin })
    const onLine = (l: string) => {
      if (l.trim() !== word) return
      input.off("line", onLine)
      resume(Effect.void)
    }
    input.on("line", onLine)
  })

const race = (store: IdempotencyStore.Store) =>
  Effect.gen(function*() {
    const n = Number(keys)
    yield* line("ready")
    yield* command("go")
    const started = performance.now()
    const answers = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `key-${i}`),
      (key) => Effect.map(store.claim(request(key)), (answer) => ({ key, answer })),
      { concurrency: Number(extra ?? 8) }
    )
    const millis = performance.now() - started
    yield* line("claimed")
    yield* command("complete")
    yield* Effect.forEach(
      answers,
      ({ answer, key }) => answer._tag === "Claimed" ? complete(store, key, answer.token) : Effect.void,
      { concurrency: Number(extra ?? 8), discard: true }
    )
    const claimed = answers.filter((a) => a.answer._tag === "Claimed").map((a) => a.key)
    const others: Record<string, number> = {}
    for (const { answer } of answers) {
      if (answer._tag !== "Claimed") others[answer._tag] = (others[answer._tag] ?? 0) + 1
    }
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
  Layer.provide(SqliteClient.layer({ filename }))
)
const modes: Record<string, (store: IdempotencyStore.Store) => Effect.Effect<void, unknown>> = { race, hold, takeover }

Effect.runPromise(Effect.flatMap(IdempotencyStore.IdempotencyStore, modes[mode]!).pipe(Effect.provide(StoreLive))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
