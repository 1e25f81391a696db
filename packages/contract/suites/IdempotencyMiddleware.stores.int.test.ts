/**
 * A handler that has started runs to its end and is never started again for its key while it may still complete —
 * the client closing its connection, or a deadline passing, after the handler's (awaited) commit must not let the
 * retry run it a second time. Over real HTTP (the edition's NodeHttpServer, ./support/idempotencyNode.ts), on every
 * store: memory, SQLite (the edition's client), PostgreSQL and Redis (the latter two from DATABASE_URL / REDIS_URL;
 * in CI a missing service fails the run).
 */
import {
  available,
  deleteKeys,
  describeWith,
  dropPgTables,
  edition,
  eventually,
  fork,
  freshName,
  HttpServerResponse,
  jsonResponse,
  PgLive,
  REDIS_URL,
  scoped,
  sqliteLayer,
  TestClock,
  uniquePrefix
} from "#edition"
import { afterAll, describe, expect } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { DeadlineMiddleware, IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { post, rawClient, serveNode } from "./support/idempotencyNode.js"

const dir = mkdtempSync(join(tmpdir(), `effect-resilience-${edition}-detached-`))
const redisPrefix = uniquePrefix("detached")
const table = freshName("detached")

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  if (available.redis) await deleteKeys(redisPrefix)
  if (available.postgres) await Effect.runPromise(dropPgTables([table]).pipe(Effect.provide(PgLive)))
})

const stores: ReadonlyArray<
  readonly [string, ReadonlyArray<"postgres" | "redis">, Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>]
> = [
  ["memory", [], IdempotencyStore.layerMemory],
  [
    "SQLite",
    [],
    IdempotencyStoreSql.layer({ table }).pipe(Layer.provide(sqliteLayer({ filename: join(dir, "keys.db") })))
  ],
  ["PostgreSQL", ["postgres"], IdempotencyStoreSql.layer({ table, cleanup: false }).pipe(Layer.provide(PgLive))],
  ["Redis", ["redis"], IdempotencyStoreRedis.layer({ url: REDIS_URL, prefix: redisPrefix })]
]

/**
 * An orders endpoint whose first run commits (counts the order and says so), then waits for `gate` before
 * answering, as a handler does whose answer is slower than its commit; later runs answer at once. Outside
 * the middlewares, `gone` completes when the server interrupts the request (the client left, or the
 * deadline passed). Returns the server's port.
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
    return jsonResponse({ order: n }, { status: 201 })
  })
  const idempotent = yield* IdempotencyMiddleware.make()
  const app = handler.pipe(
    idempotent,
    DeadlineMiddleware.make(),
    Effect.onInterrupt(() => Deferred.succeed(gone, undefined))
  )
  const port = yield* serveNode(app)
  return { port, committed, gate, gone, commits: () => commits }
})

/** Sends a POST over a raw socket; the returned effect closes it without reading the answer. */
const postThenHangUp = (port: number, key: string) =>
  Effect.sync(() =>
    rawClient(
      port,
      `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\n` +
        `Content-Length: 2\r\n\r\n{}`
    ).leave
  )

/** Asks again until the first request is no longer in progress (409), then returns the answer. */
const untilSettled = (port: number, key: string) =>
  Effect.gen(function*() {
    let reply = yield* post(port, "/orders", { key })
    yield* eventually(Effect.suspend(() =>
      reply.status !== 409 ? Effect.succeed(true) : Effect.map(post(port, "/orders", { key }), (r) => {
        reply = r
        return false
      })
    ))
    return reply
  })

for (const [name, services, layer] of stores) {
  const body = () => {
    scoped(
      "a client that hangs up after the commit: the handler runs on, once; the retry gets its answer",
      () =>
        Effect.gen(function*() {
          const orders = yield* slowAfterCommit
          const hangUp = yield* postThenHangUp(orders.port, "hang-up")
          yield* Deferred.await(orders.committed)
          yield* hangUp
          yield* Deferred.await(orders.gone)
          // the handler is still running: its key is taken, not released
          expect((yield* post(orders.port, "/orders", { key: "hang-up" })).status).toBe(409)
          yield* Deferred.succeed(orders.gate, undefined)
          const retry = yield* untilSettled(orders.port, "hang-up")
          expect(retry.status).toBe(201)
          expect(retry.headers["idempotent-replayed"]).toBe("true")
          expect(JSON.parse(retry.body)).toEqual({ order: 1 })
          expect(orders.commits()).toBe(1)
        }).pipe(Effect.provide(layer)),
      30_000
    )

    scoped(
      "a deadline that passes after the commit: 504 now, the stored answer for the retry",
      () =>
        Effect.gen(function*() {
          const orders = yield* slowAfterCommit
          const first = yield* fork(
            post(orders.port, "/orders", { key: "deadline", headers: { "request-timeout-ms": "50" } })
          )
          yield* Deferred.await(orders.committed)
          yield* TestClock.adjust("50 millis")
          expect((yield* Fiber.join(first)).status).toBe(504)
          expect((yield* post(orders.port, "/orders", { key: "deadline" })).status).toBe(409)
          yield* Deferred.succeed(orders.gate, undefined)
          const retry = yield* untilSettled(orders.port, "deadline")
          expect(retry.status).toBe(201)
          expect(retry.headers["idempotent-replayed"]).toBe("true")
          expect(orders.commits()).toBe(1)
        }).pipe(Effect.provide(layer)),
      30_000
    )

    scoped(
      "a 16 KB scope (a long credential) is stored as its digest: no store refuses it",
      () =>
        Effect.gen(function*() {
          const idempotent = yield* IdempotencyMiddleware.make({
            scope: () => Effect.succeed(`sk_${"x".repeat(16_000)}`)
          })
          const handler = Effect.succeed(HttpServerResponse.text("created", { status: 201 }))
          const port = yield* serveNode(handler.pipe(idempotent))
          expect((yield* post(port, "/orders", { key: "long-scope" })).status).toBe(201)
          expect((yield* post(port, "/orders", { key: "long-scope" })).headers["idempotent-replayed"]).toBe("true")
        }).pipe(Effect.provide(layer)),
      30_000
    )
  }
  if (services.length === 0) describe(`detached handlers (${name})`, body)
  else describeWith(services, `detached handlers (${name})`, body)
}
