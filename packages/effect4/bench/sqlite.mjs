// One process, one run: claims per second of IdempotencyStore/Sql over effect-resilience/Sqlite (the built dist/),
// each claim completed at once (the two writes of a request the middleware lets through), on a fresh file in the
// temp directory: with write-ahead logging at synchronous NORMAL (the default), at FULL, and in memory. The same
// loop over the Effect 3 edition's store (better-sqlite3 through @effect/sql-sqlite-node) is in the README.
import { Duration, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import * as IdempotencyStoreSql from "../dist/IdempotencyStore/Sql.js"
import { IdempotencyStore } from "../dist/index.js"
import * as Sqlite from "../dist/Sqlite.js"

const n = Number(process.env.N ?? 3000)
const dir = mkdtempSync(join(tmpdir(), "effect-resilience-bench-"))
const body = new Uint8Array(200)

const run = (name, config) =>
  IdempotencyStore.IdempotencyStore.use((store) =>
    Effect.gen(function*() {
      const started = performance.now()
      for (let i = 0; i < n; i++) {
        const request = {
          scope: "s",
          key: `k${i}`,
          fingerprint: "f",
          ttl: Duration.hours(1),
          lease: Duration.minutes(1)
        }
        const claimed = yield* store.claim(request)
        if (claimed._tag !== "Claimed") return yield* Effect.die(`${name}: ${claimed._tag}`)
        yield* store.complete(
          { scope: "s", key: `k${i}`, token: claimed.token },
          { status: 201, headers: {}, body },
          Duration.hours(1)
        )
      }
      const seconds = (performance.now() - started) / 1000
      console.log(
        `${name.padEnd(34)} ${String(Math.round(n / seconds)).padStart(6)} claims/s (${n} in ${seconds.toFixed(2)} s)`
      )
    })
  ).pipe(Effect.provide(IdempotencyStoreSql.layer({ cleanup: false }).pipe(Layer.provide(Sqlite.layer(config)))))

try {
  await Effect.runPromise(run("file, WAL, synchronous NORMAL", { filename: join(dir, "normal.db") }))
  await Effect.runPromise(run("file, WAL, synchronous FULL", { filename: join(dir, "full.db"), synchronous: "full" }))
  await Effect.runPromise(run("in memory", { filename: ":memory:" }))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
