/**
 * The idempotency middleware under the traffic a server sees, over real HTTP (the edition's NodeHttpServer), on
 * every store (memory, SQLite, PostgreSQL, Redis; the last two from DATABASE_URL / REDIS_URL, and in CI a missing
 * service fails the run). All at once: a burst of new keys (on PostgreSQL their claims and completions leave in
 * shared statements), slow orders with a duplicate sent while they run, clients that hang up while their
 * order runs, uploads that stall half-way, keys reused with another body, requests without a key, and then every
 * client's retry. Each order runs exactly once, every client gets the answer its case promises, and every replay
 * is the first answer.
 */
import {
  available,
  callback,
  deleteKeys,
  describeWith,
  dropPgTables,
  edition,
  eventually,
  fork,
  freshName,
  HttpServerRequest,
  jsonResponse,
  PgLive,
  REDIS_URL,
  scoped,
  sqliteLayer,
  uniquePrefix
} from "#edition"
import { afterAll, describe, expect } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { post, type Reply, serveNode } from "./support/idempotencyNode.js"
const dir = mkdtempSync(join(tmpdir(), `effect-resilience-${edition}-traffic-`))
const redisPrefix = uniquePrefix("traffic")
const table = freshName("traffic")

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
const CHEAP = 48
const SLOW = 8
const HANG_UPS = 4
const UPLOADS = 2
const range = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`)

/**
 * `POST /orders`: counts a run per key and answers 201 with the run's number; an order whose body says `slow`
 * waits for `gate` after it started (its commit), as an expensive order does.
 */
const ordersServer = Effect.gen(function*() {
  const gate = yield* Deferred.make<void>()
  const runs = new Map<string, number>()
  let started = 0
  let seq = 0
  const handler = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = (yield* request.json) as { readonly item: string; readonly slow?: boolean }
    const key = request.headers["idempotency-key"]!
    runs.set(key, (runs.get(key) ?? 0) + 1)
    const order = ++seq
    if (body.slow === true) {
      started++
      yield* Deferred.await(gate)
    }
    return jsonResponse({ order, item: body.item }, { status: 201 })
  })
  const idempotent = yield* IdempotencyMiddleware.make()
  const port = yield* serveNode(idempotent(handler))
  return { gate, runs, port, started: () => started }
})

interface Raw {
  readonly socket: Socket
  received: string
}

/** A POST over a raw socket that sends `sent` of its body now; the rest is the caller's to send (or not). */
const rawPost = (port: number, key: string, body: string, sent: number) =>
  Effect.acquireRelease(
    callback<Raw>((resume) => {
      const socket = connect({ host: "127.0.0.1", port }, () => {
        socket.write(
          `POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nIdempotency-Key: ${key}\r\n\r\n${body.slice(0, sent)}`
        )
        resume(Effect.succeed(raw))
      })
      const raw: Raw = { socket, received: "" }
      socket.on("data", (chunk) => (raw.received += chunk.toString("latin1")))
      socket.on("error", () => {})
    }),
    (raw) => Effect.sync(() => raw.socket.destroy())
  )

/** Asks until the key's first request is no longer in progress (409), then returns the answer. */
const settled = (port: number, key: string, body: unknown) =>
  Effect.gen(function*() {
    let reply: Reply = yield* post(port, "/orders", { key, body })
    yield* eventually(Effect.suspend(() =>
      reply.status !== 409 ? Effect.succeed(true) : Effect.map(post(port, "/orders", { key, body }), (r) => {
        reply = r
        return false
      })
    ))
    return reply
  })

/** What a client sends: a new key, a duplicate of a running order, a replay, a reused key, or no key at all. */
type Sent = readonly ["new" | "duplicate" | "keyless" | "replay" | "reused", string]

const slowBody = (key: string) => ({ item: key, slow: true })

/** Sends every request at once and pairs each with its reply. */
const sendAll = (port: number, requests: ReadonlyArray<Sent>) =>
  all(requests.map(([kind, key]) =>
    Effect.map(
      kind === "keyless"
        ? post(port, "/orders", { body: { item: key } })
        : post(port, "/orders", {
          key,
          body: kind === "duplicate" ? slowBody(key) : { item: kind === "reused" ? "x" : key }
        }),
      (reply) => [kind, key, reply] as const
    )
  ))

/** The status, whether it is a replay, and the item of a reply (for 201s), beside what was sent. */
const outcome = (
  [kind, key, reply]: readonly [Sent[0], string, Reply]
) => [
  kind,
  key,
  reply.status,
  reply.headers["idempotent-replayed"] === "true",
  reply.status === 201 ? JSON.parse(reply.body).item : null
]

/** What each kind of request must get back. */
const expected = ([kind, key]: readonly [Sent[0], string, Reply]) => {
  switch (kind) {
    case "new":
      return [kind, key, 201, false, key]
    case "replay":
      return [kind, key, 201, true, key]
    case "duplicate":
      return [kind, key, 409, false, null]
    case "keyless":
      return [kind, key, 400, false, null]
    case "reused":
      return [kind, key, 422, false, null]
  }
}

const all = <A, E, R>(effects: ReadonlyArray<Effect.Effect<A, E, R>>): Effect.Effect<Array<A>, E, R> =>
  Effect.all(effects, { concurrency: "unbounded" })

for (const [name, services, layer] of stores) {
  const body = () => {
    scoped(
      "mixed traffic: each order runs once, every client gets its answer, replays are the first answer",
      () =>
        Effect.gen(function*() {
          const server = yield* ordersServer
          const cheap = range(CHEAP, "cheap")
          const slow = range(SLOW, "slow")
          const hangUps = range(HANG_UPS, "hang-up")
          const uploads = range(UPLOADS, "upload")

          // uploads that stall after half their body, and orders whose clients will hang up while they run
          const stalled = yield* Effect.forEach(
            uploads,
            (key) => rawPost(server.port, key, JSON.stringify({ item: key }), 8)
          )
          const leaving = yield* Effect.forEach(
            hangUps,
            (key) => rawPost(server.port, key, JSON.stringify(slowBody(key)), Infinity)
          )
          const firstSlow = yield* fork(
            all(slow.map((key) => post(server.port, "/orders", { key, body: slowBody(key) })))
          )
          yield* eventually(Effect.sync(() => server.started() === SLOW + HANG_UPS))
          for (const raw of leaving) raw.socket.destroy()

          // while those run or stall, at once and interleaved (so that on PostgreSQL new claims share statements with
          // claims that find their key taken or done): a burst of new keys, duplicates of the running orders, and
          // requests without a key
          const running = [...slow, ...hangUps]
          const burst = yield* sendAll(
            server.port,
            cheap.flatMap((key, i): Array<Sent> => [
              ["new", key],
              ...(i % 4 === 0 ? [["duplicate", running[i / 4]!] as const] : []),
              ...(i % 24 === 0 ? [["keyless", `none-${i}`] as const] : [])
            ])
          )
          expect(burst.map(outcome)).toEqual(burst.map(expected))
          expect(burst.filter(([kind]) => kind === "duplicate")).toHaveLength(running.length)
          expect(stalled.every((raw) => raw.received === "")).toBe(true)
          const answers = new Map(burst.filter(([kind]) => kind === "new").map(([, key, reply]) => [key, reply.body]))

          // the same keys again, interleaved: the burst's replays (each the first answer), keys reused with another
          // body, and more new keys
          const again = yield* sendAll(
            server.port,
            cheap.flatMap((key, i): Array<Sent> => [
              ["replay", key],
              ...(i < 4 ? [["reused", key] as const] : []),
              ...(i % 6 === 0 ? [["new", `late-${i}`] as const] : [])
            ])
          )
          expect(again.map(outcome)).toEqual(again.map(expected))
          const late = again.filter(([kind]) => kind === "new").map(([, key]) => key)
          expect(again.filter(([kind]) => kind === "replay").map(([, , reply]) => reply.body)).toEqual(
            cheap.map((key) => answers.get(key))
          )

          // the stalled uploads finish, the slow orders are let go; every retry gets the first answer
          for (const [i, raw] of stalled.entries()) raw.socket.write(JSON.stringify({ item: uploads[i] }).slice(8))
          yield* eventually(Effect.sync(() => stalled.every((raw) => / 201 /.test(raw.received.split("\r\n")[0]!))))
          yield* Deferred.succeed(server.gate, undefined)
          const first = yield* Fiber.join(firstSlow)
          expect(first.map((r) => r.status)).toEqual(slow.map(() => 201))
          const retries = yield* all([
            ...running.map((key) => settled(server.port, key, slowBody(key))),
            ...uploads.map((key) => settled(server.port, key, { item: key }))
          ])
          expect(retries.map((r) => [r.status, r.headers["idempotent-replayed"], JSON.parse(r.body).item])).toEqual(
            [...running, ...uploads].map((key) => [201, "true", key])
          )
          expect(retries.slice(0, SLOW).map((r) => r.body)).toEqual(first.map((r) => r.body))

          // each order ran once; nothing else ran
          const everyKey = [...cheap, ...late, ...slow, ...hangUps, ...uploads]
          expect([...server.runs.keys()].sort()).toEqual([...everyKey].sort())
          expect([...server.runs.values()].every((n) => n === 1)).toBe(true)
        }).pipe(Effect.provide(layer)),
      60_000
    )
  }
  if (services.length === 0) describe(`idempotency under mixed traffic (${name})`, body)
  else describeWith(services, `idempotency under mixed traffic (${name})`, body)
}
