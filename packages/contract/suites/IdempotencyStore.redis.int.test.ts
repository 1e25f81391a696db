/**
 * `IdempotencyStore/Redis` against one Redis node (`REDIS_URL`): the shared store contract, then what only Redis
 * has — the key layout and its expiry, corrupt records, an unreachable server, a client of the caller's — and the
 * middleware over Redis (served in memory, ./support/idempotencyServer.ts). The Cluster runs are in each edition's
 * redisCluster.int.test.ts.
 */
import {
  closedPort,
  deleteKeys,
  describeRedis,
  HttpServerResponse,
  REDIS_URL,
  redisKeyOf as keyOf,
  scoped,
  TestClock,
  uniquePrefix
} from "#edition"
import { afterAll, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import { Redis } from "ioredis"
import { idempotencyStoreSuite } from "./idempotencyStoreSuite.js"
import { serve } from "./support/idempotencyServer.js"

const prefix = uniquePrefix("idem")
const layer = IdempotencyStoreRedis.layer({ url: REDIS_URL, prefix })

let counter = 0
const fresh = (what: string) => `${what}-${++counter}`

/** An orders endpoint that counts how often its handler really ran. */
const makeOrders = () => {
  let runs = 0
  const handler = Effect.suspend(() => {
    const n = ++runs
    return HttpServerResponse.json({ id: n }, { status: 201, headers: { location: `/orders/${n}` } })
  }).pipe(Effect.orDie)
  return { handler, runs: () => runs }
}

const inspect = <A>(f: (client: Redis) => Promise<A>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Redis(REDIS_URL)),
    (client) => Effect.promise(() => f(client)),
    (client) => Effect.sync(() => client.disconnect())
  )

const request = (key: string): IdempotencyStore.ClaimRequest => ({
  scope: "s",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.seconds(10)
})

describeRedis("IdempotencyStore/Redis", () => {
  afterAll(() => deleteKeys(prefix))

  idempotencyStoreSuite("redis", layer)

  scoped("the middleware over Redis runs the first request and replays duplicates", () =>
    Effect.gen(function*() {
      const orders = makeOrders()
      const send = yield* serve(orders.handler.pipe(yield* IdempotencyMiddleware.make()))
      const key = fresh("mw")
      const post = (sku: string) => send({ path: "/orders", key, body: { sku } })
      // simultaneous duplicates: one runs, the others get 201 (replay) or 409 (still running)
      const racing = yield* Effect.all(Array.from({ length: 30 }, () => post("BOOK-1")), { concurrency: "unbounded" })
      expect(orders.runs()).toBe(1)
      for (const reply of racing) expect([201, 409]).toContain(reply.status)
      const first = racing.find((r) => r.status === 201 && r.headers["idempotent-replayed"] === undefined)!
      const replies = yield* Effect.all(Array.from({ length: 10 }, () => post("BOOK-1")), { concurrency: "unbounded" })
      expect(first.status).toBe(201)
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      for (const again of replies) {
        expect(again.status).toBe(201)
        expect(again.body).toBe(first.body)
        expect(again.headers["location"]).toBe("/orders/1")
        expect(again.headers["idempotent-replayed"]).toBe("true")
      }
      expect(orders.runs()).toBe(1)
      expect((yield* post("OTHER")).status).toBe(422)
    }).pipe(Effect.provide(layer)))

  scoped("the middleware answers 503 and does not run the handler when Redis is down", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const orders = makeOrders()
      const down = IdempotencyStoreRedis.layer({ url: `redis://127.0.0.1:${port}`, timeout: "500 millis" })
      const idempotent = yield* IdempotencyMiddleware.make().pipe(Effect.provide(down))
      const send = yield* serve(orders.handler.pipe(idempotent))
      const reply = yield* send({ path: "/orders", key: fresh("down") })
      expect(reply.status).toBe(503)
      expect(reply.headers["retry-after"]).toBe("1")
      expect(orders.runs()).toBe(0)
    }))

  it.live("a store call fails with IdempotencyStoreError, not a defect, when Redis is unreachable", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const down = IdempotencyStoreRedis.layer({ url: `redis://127.0.0.1:${port}`, timeout: "500 millis" })
      const store = yield* Effect.provide(
        Effect.gen(function*() {
          return yield* IdempotencyStore.IdempotencyStore
        }),
        down
      )
      const error = yield* Effect.flip(store.claim(request("k")))
      expect(error).toBeInstanceOf(IdempotencyStore.IdempotencyStoreError)
      expect((error as IdempotencyStore.IdempotencyStoreError).operation).toBe("claim")
      const ref = { scope: "s", key: "k", token: "t" }
      const body = new Uint8Array()
      expect((yield* Effect.flip(store.complete(ref, { status: 200, headers: {}, body }, Duration.hours(1)))).operation)
        .toBe("complete")
      expect((yield* Effect.flip(store.renew(ref, Duration.seconds(10)))).operation).toBe("renew")
      expect((yield* Effect.flip(store.release(ref))).operation).toBe("release")
    }))

  it.effect("one hash per record under a Cluster hash tag; Redis deletes it the margin after its expiry", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const key = fresh("{layout}:key")
      yield* TestClock.adjust("5 seconds")
      const started = Date.now()
      const claim = yield* store.claim({
        scope: "tenant:1",
        key,
        fingerprint: "f",
        ttl: Duration.minutes(10),
        lease: Duration.seconds(30)
      })
      expect(claim._tag).toBe("Claimed")
      const redisKey = keyOf(prefix, "tenant:1", key)
      expect(redisKey.startsWith(`${prefix}{tenant%3A1:`)).toBe(true)
      expect(redisKey.split("{")).toHaveLength(2)
      expect(redisKey.endsWith("}")).toBe(true)
      const [type, fields, pttl] = yield* inspect((c) =>
        Promise.all([c.type(redisKey), c.hgetall(redisKey), c.pttl(redisKey)])
      )
      expect(type).toBe("hash")
      expect(fields).toMatchObject({ fp: "f", done: "0", lease: "35000", exp: "605000" })
      // ttl 10 min + margin 1 min, counted down in real time since (at the earliest) before the claim
      expect(pttl).toBeGreaterThanOrEqual(660_000 - (Date.now() - started + 1))
      expect(pttl).toBeLessThanOrEqual(660_000)
    }).pipe(Effect.provide(layer)))

  it.effect("a corrupt record is an IdempotencyStoreError, not a defect", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const wrongType = fresh("wrongtype")
      yield* inspect((c) => c.set(keyOf(prefix, "s", wrongType), "not a hash", "EX", 60))
      const error = yield* Effect.flip(store.claim(request(wrongType)))
      expect(error._tag).toBe("IdempotencyStoreError")
      expect(String(error.cause)).toContain("WRONGTYPE")
      const badHeaders = fresh("badheaders")
      yield* inspect((c) =>
        c.hset(keyOf(prefix, "s", badHeaders), {
          fp: "f",
          tok: "t",
          done: "1",
          lease: "0",
          exp: String(Duration.toMillis(Duration.hours(1))),
          status: "200",
          headers: "{not json",
          body: ""
        })
      )
      const corrupt = yield* Effect.flip(store.claim(request(badHeaders)))
      expect(corrupt).toBeInstanceOf(IdempotencyStore.IdempotencyStoreError)
      expect((corrupt as IdempotencyStore.IdempotencyStoreError).operation).toBe("claim")
    }).pipe(Effect.provide(layer)))

  it.effect("a client passed in is used as it is and stays open after the layer is released", () =>
    Effect.gen(function*() {
      const client = new Redis(REDIS_URL)
      const key = fresh("client")
      const result = yield* Effect.gen(function*() {
        return yield* (yield* IdempotencyStore.IdempotencyStore).claim(request(key))
      }).pipe(
        Effect.provide(IdempotencyStoreRedis.layer({ client, prefix }))
      )
      expect(result._tag).toBe("Claimed")
      expect(yield* Effect.promise(() => client.exists(keyOf(prefix, "s", key)))).toBe(1)
      client.disconnect()
    }))

  it("rejects bad options when built", () => {
    expect(() => IdempotencyStoreRedis.layer({ url: REDIS_URL, prefix: "{x}" })).toThrow(/prefix/)
    expect(() => IdempotencyStoreRedis.layer({ url: REDIS_URL, timeout: "nonsense" as "1 second" })).toThrow(/timeout/)
    expect(() => IdempotencyStoreRedis.layer({} as { url: string })).toThrow(/exactly one of client, url or cluster/)
  })
})
