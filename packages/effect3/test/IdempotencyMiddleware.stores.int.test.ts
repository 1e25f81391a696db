/**
 * A handler that has started runs to its end and is never started again for its key while it may still
 * complete: the client closing its connection, or a deadline passing, after the handler's (awaited) commit
 * must not let the retry run it a second time. Over real HTTP, on every store: memory, SQLite, PostgreSQL
 * and Redis (the latter two from DATABASE_URL / REDIS_URL; in CI a missing service fails the run).
 */
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { HttpServer } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as IdempotencyStoreRedis from "../src/IdempotencyStore/Redis.js"
import * as IdempotencyStoreSql from "../src/IdempotencyStore/Sql.js"
import { DeadlineMiddleware, IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { eventually } from "./support/eventually.js"
import { post, serve, TestServer } from "./support/httpServer.js"
import { deleteKeys, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { DATABASE_URL, describeWith } from "./support/services.js"

const dir = mkdtempSync(join(tmpdir(), "effect-resilience-detached-"))
const redisPrefix = uniquePrefix("detached")
const table = `er_detached_${process.pid}_${Date.now().toString(36)}`

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  await deleteKeys(redisPrefix)
})

const stores: ReadonlyArray<
  readonly [string, ReadonlyArray<"postgres" | "redis">, Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>]
> = [
  ["memory", [], IdempotencyStore.layerMemory],
  [
    "SQLite",
    [],
    IdempotencyStoreSql.layer({ table }).pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "keys.db") })))
  ],
  [
    "PostgreSQL",
    ["postgres"],
    IdempotencyStoreSql.layer({ table, cleanup: false }).pipe(
      Layer.provide(PgClient.layer({ url: Redacted.make(DATABASE_URL) }))
    )
  ],
  ["Redis", ["redis"], IdempotencyStoreRedis.layer({ url: REDIS_URL, prefix: redisPrefix })]
]

/**
 * An orders endpoint whose first run commits (counts the order and says so), then waits for `gate` before
 * answering, as a handler does whose answer is slower than its commit; later runs answer at once. Outside
 * the middlewares, `gone` completes when the server interrupts the request (the client left, or the
 * deadline passed).
 */
const slowAfterCommit = Effect.gen(function*() {
  const committed = yield* Deferred.make<void>()
  const gate = yield* Deferred.make<void>()
  const gone = yield* Deferred.make<void>()
  let commits = 0
  const handler = Effect.gen(function*() {
    const n = ++commits // the commit
    if (n === 1) {
      yield* Deferred.succeed(committed, undefined)
      yield* Deferred.await(gate)
    }
    return HttpServerResponse.unsafeJson({ order: n }, { status: 201 })
  })
  const idempotent = yield* IdempotencyMiddleware.make()
  const app = handler.pipe(
    idempotent,
    DeadlineMiddleware.make(),
    Effect.onInterrupt(() => Deferred.succeed(gone, undefined))
  )
  yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", app)))
  return { committed, gate, gone, commits: () => commits }
})

/** Sends a POST over a raw socket and returns a function that closes it without reading the answer. */
const postThenHangUp = (key: string) =>
  Effect.flatMap(HttpServer.HttpServer, (server) =>
    Effect.sync(() => {
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const socket = connect({ host: "127.0.0.1", port })
      socket.on("error", () => {})
      socket.write(
        `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\n` +
          `Content-Length: 2\r\n\r\n{}`
      )
      return Effect.sync(() => socket.destroy())
    }))

/** Asks again until the first request is no longer in progress (409), then returns the answer. */
const untilSettled = (key: string) =>
  Effect.gen(function*() {
    let reply = yield* post("/orders", { key })
    yield* eventually(Effect.suspend(() =>
      reply.status !== 409 ? Effect.succeed(true) : Effect.as(
        Effect.tap(post("/orders", { key }), (r) => {
          reply = r
        }),
        false
      )
    ))
    return reply
  })

for (const [name, services, layer] of stores) {
  const body = () => {
    it.scoped(
      "a client that hangs up after the commit: the handler runs on, once; the retry gets its answer",
      () =>
        Effect.gen(function*() {
          const orders = yield* slowAfterCommit
          const hangUp = yield* postThenHangUp("hang-up")
          yield* Deferred.await(orders.committed)
          yield* hangUp
          yield* Deferred.await(orders.gone)
          // the handler is still running: its key is taken, not released
          expect((yield* post("/orders", { key: "hang-up" })).status).toBe(409)
          yield* Deferred.succeed(orders.gate, undefined)
          const retry = yield* untilSettled("hang-up")
          expect(retry.status).toBe(201)
          expect(retry.headers["idempotent-replayed"]).toBe("true")
          expect(JSON.parse(retry.body)).toEqual({ order: 1 })
          expect(orders.commits()).toBe(1)
        }).pipe(Effect.provide(Layer.merge(TestServer, layer))),
      30_000
    )

    it.scoped(
      "a deadline that passes after the commit: 504 now, the stored answer for the retry",
      () =>
        Effect.gen(function*() {
          const orders = yield* slowAfterCommit
          const first = yield* Effect.fork(
            post("/orders", { key: "deadline", headers: { "request-timeout-ms": "50" } })
          )
          yield* Deferred.await(orders.committed)
          yield* TestClock.adjust("50 millis")
          expect((yield* first).status).toBe(504)
          expect((yield* post("/orders", { key: "deadline" })).status).toBe(409)
          yield* Deferred.succeed(orders.gate, undefined)
          const retry = yield* untilSettled("deadline")
          expect(retry.status).toBe(201)
          expect(retry.headers["idempotent-replayed"]).toBe("true")
          expect(orders.commits()).toBe(1)
        }).pipe(Effect.provide(Layer.merge(TestServer, layer))),
      30_000
    )

    it.scoped(
      "a 16 KB scope (a long credential) is stored as its digest: no store refuses it",
      () =>
        Effect.gen(function*() {
          const idempotent = yield* IdempotencyMiddleware.make({
            scope: () => Effect.succeed(`sk_${"x".repeat(16_000)}`)
          })
          const handler = Effect.succeed(HttpServerResponse.text("created", { status: 201 }))
          yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", handler.pipe(idempotent))))
          expect((yield* post("/orders", { key: "long-scope" })).status).toBe(201)
          expect((yield* post("/orders", { key: "long-scope" })).headers["idempotent-replayed"]).toBe("true")
        }).pipe(Effect.provide(Layer.merge(TestServer, layer))),
      30_000
    )
  }
  if (services.length === 0) describe(`detached handlers (${name})`, body)
  else describeWith(services, `detached handlers (${name})`, body)
}
