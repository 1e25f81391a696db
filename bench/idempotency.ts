/**
 * Issue #5: requests/s through the idempotency middleware with each store, next to the same server
 * without the middleware. One in-process server on 127.0.0.1, undici with 32 requests in flight, every
 * request a new key (the worst case: a claim and a completion per request). Reported as ns/request in
 * --json; stores whose service is unreachable are skipped with a note.
 */
import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Redacted } from "effect"
import * as IdempotencyMiddleware from "effect-resilience/IdempotencyMiddleware"
import * as IdempotencyStore from "effect-resilience/IdempotencyStore"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, request } from "undici"
import type { Case } from "./harness.js"

const REQUESTS = 3_000
const IN_FLIGHT = 32

const handler = Effect.succeed(HttpServerResponse.unsafeJson({ id: 1 }, { status: 201 }))

const load = async (port: number): Promise<number> => {
  const agent = new Agent({ connections: IN_FLIGHT })
  const url = `http://127.0.0.1:${port}/orders`
  let next = 0
  const worker = async () => {
    while (next < REQUESTS) {
      next++
      const response = await request(url, {
        method: "POST",
        dispatcher: agent,
        headers: { "content-type": "application/json", "idempotency-key": randomUUID() },
        body: "{\"sku\":\"A\"}"
      })
      await response.body.dump()
      if (response.statusCode !== 201) throw new Error(`status ${response.statusCode}`)
    }
  }
  await Promise.all(Array.from({ length: 100 }, worker).slice(0, IN_FLIGHT)) // warm-up included below
  next = 0
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  await agent.close()
  return REQUESTS / seconds
}

const serveAndLoad = (withMiddleware: boolean, store: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>) =>
  Effect.gen(function*() {
    const idempotent = yield* IdempotencyMiddleware.make()
    const app = HttpRouter.empty.pipe(HttpRouter.post("/orders", withMiddleware ? handler.pipe(idempotent) : handler))
    yield* HttpServer.serveEffect(app)
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.promise(() => load(port))
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.merge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }), store))
  )

const sqlite = Layer.unwrapScoped(Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "bench-idem-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => IdempotencyStoreSql.layer().pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "idem.db") })))
))
const postgres = IdempotencyStoreSql.layer({ table: "bench_idempotency" }).pipe(
  Layer.provide(PgClient.layer({
    url: Redacted.make(process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"),
    // a pool sized for the load: one connection per request in flight (pg's default is 10)
    maxConnections: IN_FLIGHT
  }))
)
const redis = IdempotencyStoreRedis.layer({
  url: process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
  prefix: `bench-idem-${process.pid}:`
})

// every request a new key, from one client scope: the default bounds (10,000 records, a tenth per scope)
// would refuse keys after the first thousand
const memory = IdempotencyStore.layerMemoryWith({ maxRecords: Infinity })

const variants: ReadonlyArray<readonly [string, boolean, Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>]> = [
  ["http: no middleware", false, memory],
  ["http: idempotency (memory)", true, memory],
  ["http: idempotency (sqlite)", true, sqlite],
  ["http: idempotency (postgres)", true, postgres],
  ["http: idempotency (redis)", true, redis]
]

export const cases: ReadonlyArray<Case> = []
export const targets: ReadonlyArray<readonly [string, string, number]> = []

/** ns per request for each variant (so --json keeps its `{ cases: { name: nsPerOp } }` shape). */
export const extra = async (): Promise<Record<string, number>> => {
  const out: Record<string, number> = {}
  for (const [name, withMiddleware, store] of variants) {
    const result = await Effect.runPromise(Effect.either(serveAndLoad(withMiddleware, store)))
    if (result._tag === "Right") out[name] = 1e9 / result.right
    else if (!process.argv.includes("--json")) console.log(`${name}: skipped (${String(result.left)})`)
  }
  return out
}

export const report = async (results: ReadonlyMap<string, number>): Promise<void> => {
  const base = results.get("http: no middleware")
  if (base === undefined) return
  console.log(`\nidempotency middleware, requests/s (${IN_FLIGHT} in flight, a new key per request):`)
  for (const [name] of variants) {
    const ns = results.get(name)
    if (ns === undefined) continue
    const rps = 1e9 / ns
    console.log(`  ${name.padEnd(34)} ${rps.toFixed(0).padStart(7)}/s  (${(base / ns).toFixed(2)}× of no middleware)`)
  }
}
