/**
 * Fault "pg-terminate-claim": three `serve --store postgres` processes take keyed POSTs while their
 * PostgreSQL backends are terminated (`pg_terminate_backend`), many of them in the middle of a claim or a
 * completion. The client retries every order with its own key until it gets its 201 (or a replay of it);
 * afterwards every logical order must exist exactly once across the three processes.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import type { Fault, FaultRow } from "../../../../examples/faults/fault.js"
import {
  classify,
  CLIENT_DEADLINE_MILLIS,
  CONCURRENCY,
  LEASE_MILLIS,
  listOrders,
  ORDERS,
  PAUSE_MILLIS,
  post,
  TABLE
} from "../../../../examples/faults/pgTerminateClaimPlan.js"
import {
  adminLayer,
  databaseUrl,
  describeTerminations,
  runName,
  spawnScript,
  startTerminator,
  withApplicationName
} from "./pgSupport.js"

export const run = (options: { readonly orders?: number } = {}): Promise<ReadonlyArray<FaultRow>> => {
  const offered = options.orders ?? ORDERS
  const app = runName("claim")
  return Effect.gen(function*() {
    const env = { DATABASE_URL: withApplicationName(databaseUrl(), app) }
    const servers = yield* Effect.all(
      [0, 1, 2].map((i) =>
        spawnScript(`serve ${i}`, "examples/serve.ts", [
          "--port",
          "0",
          "--store",
          "postgres",
          "--lease",
          String(LEASE_MILLIS)
        ], env)
      )
    )
    const urls = yield* Effect.forEach(
      servers,
      (s) =>
        Effect.map(
          s.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+/, "60 seconds"),
          (line) => /http:\S+/.exec(line)![0]
        ),
      { concurrency: 3 }
    )
    // this run's keys go when it ends (the servers' own cleanup would keep them for their 24 h TTL)
    const sql = yield* SqlClient.SqlClient
    yield* Effect.addFinalizer(() =>
      sql`DELETE FROM ${sql(TABLE)} WHERE key LIKE ${`key-${app}-%`}`.pipe(Effect.ignore)
    )
    const terminator = yield* startTerminator({
      applicationName: app,
      lockTables: [TABLE],
      classify,
      pauseMillis: [PAUSE_MILLIS[0], PAUSE_MILLIS[1]]
    })

    const statuses = new Map<string, number>()
    const seen = (status: string) => statuses.set(status, (statuses.get(status) ?? 0) + 1)
    const started = performance.now()
    /** One logical order: its own key, retried on any process until a 201 (first or replayed). */
    const order = (i: number) =>
      Effect.gen(function*() {
        const logical = `${app}-${i}`
        const key = `key-${logical}`
        for (let attempt = 0;; attempt++) {
          // one attempt in four gives up waiting early, as a client's timeout does: the answer is lost
          const timeout = Math.random() < 0.25 ? 1 + Math.floor(Math.random() * 30) : 10_000
          const answer = yield* Effect.promise(() => post(urls[(i + attempt) % urls.length]!, key, logical, timeout))
          seen(answer.status === 201 && answer.replayed ? "201-replayed" : String(answer.status))
          if (answer.status === 201) return true
          if (performance.now() - started > CLIENT_DEADLINE_MILLIS) return false
          yield* Effect.sleep(20 + Math.min(attempt, 10) * 20)
        }
      })
    const done = yield* Effect.forEach(Array.from({ length: offered }, (_, i) => i), order, {
      concurrency: CONCURRENCY
    })
    const loadMillis = performance.now() - started
    const terminations = yield* terminator.stop
    const crashed = servers.filter((s) => s.exited()).map((s) => s.label)

    const counts = new Map<string, number>()
    for (const url of urls) {
      const orders = yield* Effect.promise(() => listOrders(url))
      for (const o of orders) {
        if (o.logical?.startsWith(`${app}-`)) counts.set(o.logical, (counts.get(o.logical) ?? 0) + 1)
      }
    }
    let lost = 0
    let duplicated = 0
    for (let i = 0; i < offered; i++) {
      const n = counts.get(`${app}-${i}`) ?? 0
      if (n === 0) lost++
      if (n > 1) duplicated++
    }
    // what the servers logged: a completion the store could not save leaves its key to be taken over
    const logged = (what: string) =>
      servers.reduce((n, s) => n + s.lines.filter((line) => line.includes(`the store failed (${what})`)).length, 0)
    const gaveUp = done.filter((ok) => !ok).length
    const statusText = [...statuses.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([s, n]) => `${s}×${n}`)
      .join(" ")
    const midClaim = terminations.byKind["mid-claim"] ?? 0
    const row: FaultRow = {
      fault: "PostgreSQL backends terminated mid-claim under 3 serve --store postgres; keyed POSTs retried " +
        "(1 attempt in 4 times out early)",
      offered,
      lost,
      duplicated,
      notes: `${describeTerminations(terminations)} over ${(loadMillis / 1000).toFixed(1)} s; answers ${statusText}; ` +
        `store failures logged: claim ${logged("claim")}, complete ${logged("complete")}` +
        (gaveUp > 0 ? `; client gave up on ${gaveUp}` : "") +
        (crashed.length > 0 ? `; exited: ${crashed.join(", ")}` : ""),
      // the fault must really have hit claims, and the servers must have survived it
      ok: midClaim > 0 && crashed.length === 0
    }
    return [row]
  }).pipe(Effect.scoped, Effect.provide(Layer.orDie(adminLayer())), Effect.runPromise)
}

export const pgTerminateClaim: Fault = { name: "pg-terminate-claim", run: () => run() }
