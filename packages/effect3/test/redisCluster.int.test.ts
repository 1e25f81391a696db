/**
 * The Redis backends against a real 3-master Redis Cluster, started once for this file (see
 * ./support/redisCluster.ts): the same contract suites as the single-node runs (`*.redis.test.ts`,
 * `queue/redis.int.test.ts`), then what only a Cluster shows — keys spread over the nodes, every script's keys in
 * one slot (asked of the server: `CLUSTER KEYSLOT`), a slot moved to another master mid-run (`ASK`, `MOVED`,
 * `TRYAGAIN`), scripts reloaded node by node after `SCRIPT FLUSH`.
 *
 * One more suite is one more line in the body below, on `cluster.layer((client) => …)` (a layer on the shared
 * client) or `cluster.connect()` (a client of the test's own).
 */
import { expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import type { Cluster, Redis } from "ioredis"
import * as IdempotencyStoreRedis from "../src/IdempotencyStore/Redis.js"
import { IdempotencyStore, RateLimiterStore } from "../src/index.js"
import { keyOf as idempotencyKey } from "../src/internal/idempotencyStore/redis.js"
import { streamKeys } from "../src/internal/queue/redisStreamQueue.js"
import { keyOf as limiterKey } from "../src/internal/rateLimiterStore/redis.js"
import * as RateLimiterStoreRedis from "../src/RateLimiterStore/Redis.js"
import * as RedisStreamQueue from "../src/RedisStreamQueue.js"
import { breakerRedisSuite } from "./contract/breakerRedisSuite.js"
import { idempotencyStoreSuite } from "./contract/idempotencyStoreSuite.js"
import { redisStreamQueueSuite } from "./contract/queue/redisSuite.js"
import { rateLimiterSuite } from "./contract/rateLimiterSuite.js"
import { fractionalSlidingWindow } from "./contract/slidingWindow.js"
import { eventually } from "./support/eventually.js"
import { describeRedisCluster } from "./support/redisCluster.js"

let streams = 0

/** The slot the server assigns to a key. */
const slotOf = (client: Cluster, key: string): Promise<number> => client.cluster("KEYSLOT", key) as Promise<number>

const slotsOf = (client: Cluster, keys: ReadonlyArray<string>) => Promise.all(keys.map((k) => slotOf(client, k)))

/** How many keys each master holds. */
const keysPerMaster = (masters: ReadonlyArray<Redis>) => Promise.all(masters.map((m) => m.dbsize()))

/**
 * Starts moving `slot` to the next master, as `redis-cli --cluster reshard` does: the target imports it, the
 * owner migrates it, its keys go over with `MIGRATE` — from now on the owner answers `ASK` for them. The
 * returned function ends the move (`SETSLOT … NODE` on every master): then the old owner answers `MOVED`.
 */
const beginMove = async (masters: ReadonlyArray<Redis>, ports: ReadonlyArray<number>, slot: number) => {
  const ids = await Promise.all(masters.map((m) => m.call("CLUSTER", "MYID") as Promise<string>))
  const ranges = await masters[0]!.call("CLUSTER", "SLOTS") as Array<[number, number, [string, number, string]]>
  const owner = ranges.find(([first, last]) => slot >= first && slot <= last)![2][2]
  const from = ids.indexOf(owner)
  const to = (from + 1) % masters.length
  await masters[to]!.call("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]!)
  await masters[from]!.call("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]!)
  const keys = await masters[from]!.call("CLUSTER", "GETKEYSINSLOT", slot, 1000) as Array<string>
  if (keys.length > 0) await masters[from]!.call("MIGRATE", "127.0.0.1", ports[to]!, "", 0, 5000, "KEYS", ...keys)
  return async () => {
    for (const i of [to, from, ...masters.keys()]) await masters[i]!.call("CLUSTER", "SETSLOT", slot, "NODE", ids[to]!)
  }
}

describeRedisCluster("Redis Cluster", (cluster) => {
  // the contract suites, as on one node (TestClock stands still while Redis expires keys in real time: a
  // generous margin keeps the rate limiter's keys for the whole test)
  const limiterStore = cluster.layer((client) => RateLimiterStoreRedis.layer({ client, expiryMargin: "1 minute" }))
  const idempotencyStore = cluster.layer((client) => IdempotencyStoreRedis.layer({ client }))
  rateLimiterSuite("redis cluster", limiterStore)
  fractionalSlidingWindow("redis cluster", limiterStore)
  idempotencyStoreSuite("redis cluster", idempotencyStore)
  // stream names without a hash tag: their derived keys share the stream's slot by construction
  redisStreamQueueSuite("redis cluster", {
    connect: cluster.connect(),
    freshStream: () => `queue-${++streams}`,
    soakMessages: Number(process.env.SOAK_N ?? 2_000)
  })
  breakerRedisSuite("redis cluster", { connection: () => ({ client: cluster.get().client }), prefix: "cb:" })

  it.effect("the stores' keys spread over every master; each script's keys are in one slot", () =>
    Effect.gen(function*() {
      const { client, masters } = cluster.get()
      const before = yield* Effect.promise(() => keysPerMaster(masters))
      const names = Array.from({ length: 30 }, (_, i) => `spread-${i}`)
      yield* Effect.flatMap(
        RateLimiterStore.RateLimiterStore,
        (store) =>
          Effect.forEach(names, (name) => store.tokenBucket("k", 1, { name, capacity: 5, refillPerSecond: 1 }, 0))
      ).pipe(Effect.provide(limiterStore))
      yield* Effect.flatMap(
        IdempotencyStore.IdempotencyStore,
        (store) =>
          Effect.forEach(
            names,
            (key) =>
              store.claim({ scope: "s", key, fingerprint: "f", ttl: Duration.hours(1), lease: Duration.minutes(1) })
          )
      ).pipe(
        Effect.provide(idempotencyStore)
      )
      const after = yield* Effect.promise(() => keysPerMaster(masters))
      // 60 keys over 3 masters: each gained some (a store that put every key in one slot would fail this)
      after.forEach((n, i) => expect(n).toBeGreaterThan(before[i]!))

      // the keys of one limiter and key (one per algorithm) share a slot, and only the tag decides it
      for (const [name, key] of [["api", "user-42"], ["{x}", "}{"], ["a:b", "c"]]) {
        const keys = (["tb", "fw", "sw"] as const).map((a) => limiterKey("rl:", a, name!, key!))
        expect(new Set(yield* Effect.promise(() => slotsOf(client, keys))).size).toBe(1)
      }
      // an idempotency record is one key: its hash tag is the whole identity
      expect(yield* Effect.promise(() => slotOf(client, idempotencyKey("idem:", "tenant:1", "k")))).toBe(
        yield* Effect.promise(() => slotOf(client, idempotencyKey("other:", "tenant:1", "k")))
      )
      // a stream queue's keys: one slot, with or without a hash tag in the name
      for (const stream of ["orders", "{orders}", "{tenant-1}.orders", "a{b", "x:y"]) {
        const k = streamKeys(stream, true)
        const slots = yield* Effect.promise(() => slotsOf(client, [k.stream, k.dlq, k.index, k.errors]))
        expect(new Set(slots).size).toBe(1)
      }
    }))

  it.effect("stream keys: unchanged on one node and for a hash-tagged name; a name that cannot be tagged is rejected", () =>
    Effect.gen(function*() {
      expect(streamKeys("orders", false)).toEqual({
        stream: "orders",
        dlq: "orders:dlq",
        index: "orders:dlq:ids",
        errors: "orders:errors",
        deliveries: "orders:deliveries"
      })
      expect(streamKeys("orders", true)).toEqual({
        stream: "orders",
        dlq: "{orders}:dlq",
        index: "{orders}:dlq:ids",
        errors: "{orders}:errors",
        deliveries: "{orders}:deliveries"
      })
      expect(streamKeys("{orders}", true)).toEqual(streamKeys("{orders}", false))
      expect(streamKeys("{orders}", true).dlq).toBe("{orders}:dlq")
      const redis = cluster.get().client
      // no hash tag and a "}" (or an empty tag "{}"): no key can share its slot by tag — loud at construction
      for (const stream of ["a}b", "x{}y"]) {
        expect(() => RedisStreamQueue.make({ redis, stream, visibilityTimeout: "1 second" })).toThrow(/hash tag/)
        expect(streamKeys(stream, false).dlq).toBe(`${stream}:dlq`) // one node: fine as it always was
      }
      expect(() => RedisStreamQueue.make({ redis, stream: "", visibilityTimeout: "1 second" })).toThrow(/non-empty/)
      // a tagged name works on the Cluster as it is
      const source = yield* RedisStreamQueue.make<number>({
        redis,
        stream: "{tagged}:q",
        visibilityTimeout: "1 second"
      })
      yield* source.send([{ id: "m", body: 1 }])
      const [m] = yield* source.receive(1)
      yield* source.deadLetter(m!, "to see the key")
      expect(yield* Effect.promise(() => redis.xlen("{tagged}:q:dlq"))).toBe(1)
    }))

  it.live("a slot moved to another master (ASK while it migrates, MOVED after): every backend follows, state and all", () =>
    Effect.gen(function*() {
      const { client, masters, ports } = cluster.get()
      const move = (key: string) =>
        Effect.promise(() => slotOf(client, key).then((slot) => beginMove(masters, ports, slot)))
      const end = (finish: () => Promise<void>) => Effect.promise(finish)

      // rate limiter: a fixed window of 3, one request per phase
      const params = { name: "moving", limit: 3, windowMillis: 600_000 }
      const decide = Effect.flatMap(
        RateLimiterStore.RateLimiterStore,
        (store) => Effect.map(store.fixedWindow("k", 1, params, 1000), (d) => [d.allowed, d.remaining])
      ).pipe(Effect.provide(limiterStore))
      expect(yield* decide).toEqual([true, 2])
      const finishLimiter = yield* move(limiterKey("rl:", "fw", "moving", "k"))
      expect(yield* decide).toEqual([true, 1]) // ASK: the key is on the new master already
      yield* end(finishLimiter)
      expect(yield* decide).toEqual([true, 0]) // MOVED: the client learns the new owner
      expect(yield* decide).toEqual([false, 0])

      // idempotency store: a claim made before the move is found during and after it
      const request = { scope: "s", key: "moving", fingerprint: "f", ttl: Duration.hours(1), lease: Duration.hours(1) }
      const claimed = yield* Effect.flatMap(IdempotencyStore.IdempotencyStore, (store) =>
        Effect.gen(function*() {
          const first = yield* store.claim(request)
          if (first._tag !== "Claimed") return yield* Effect.dieMessage(`claimed? ${first._tag}`)
          const finish = yield* move(idempotencyKey("idem:", "s", "moving"))
          const during = yield* store.claim(request)
          yield* end(finish)
          const ref = { scope: "s", key: "moving", token: first.token }
          const completed = yield* store.complete(
            ref,
            { status: 201, headers: {}, body: new Uint8Array([1]) },
            Duration.hours(1)
          )
          const after = yield* store.claim(request)
          return [during._tag, completed, after._tag]
        })).pipe(Effect.provide(idempotencyStore))
      expect(claimed).toEqual(["InProgress", true, "Completed"])

      // stream queue: the stream, its group, its pending entries and its dead letters move together
      const redis = yield* cluster.connect()
      const stream = "moving-queue"
      const source = yield* RedisStreamQueue.make<number>({ redis, stream, visibilityTimeout: "1 minute" })
      yield* source.send([1, 2, 3].map((n) => ({ id: `m${n}`, body: n })))
      const [a] = yield* source.receive(1)
      const finishQueue = yield* move(stream)
      const [b] = yield* source.receive(1) // one key, on the new master already: ASK, then served
      // a script or transaction over the stream and keys that do not exist yet (the DLQ, the errors): Redis
      // answers TRYAGAIN until the slot has moved, and the call fails once the client gave up, changing nothing
      expect((yield* Effect.flip(source.deadLetter(b!, "poison"))).operation).toBe("deadLetter")
      expect((yield* Effect.flip(source.ack(a!))).operation).toBe("ack")
      yield* end(finishQueue)
      // …and both work once it has: nothing of the failed calls was applied (a and b are still pending)
      expect(yield* source.deadLetter(b!, "poison")).toBe(true)
      expect(yield* source.ack(a!)).toBe(true)
      const [c] = yield* source.receive(5)
      expect(yield* source.ack(c!)).toBe(true)
      expect([a!.id, b!.id, c!.id]).toEqual(["m1", "m2", "m3"])
      expect((yield* source.deadLetters.list()).map((d) => d.id)).toEqual(["m2"])
      expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
    }).pipe(Effect.scoped))

  it.effect("the stores reload their scripts node by node after SCRIPT FLUSH on every master (NOSCRIPT)", () =>
    Effect.gen(function*() {
      const { masters } = cluster.get()
      const names = Array.from({ length: 12 }, (_, i) => `noscript-${i}`)
      const decide = Effect.flatMap(
        RateLimiterStore.RateLimiterStore,
        (store) =>
          Effect.forEach(names, (name) =>
            Effect.map(
              store.fixedWindow("k", 1, { name, limit: 2, windowMillis: 60_000 }, 0),
              (d) => d.allowed
            ))
      ).pipe(Effect.provide(limiterStore))
      const claim = Effect.flatMap(
        IdempotencyStore.IdempotencyStore,
        (store) =>
          Effect.forEach(names, (key) =>
            Effect.map(
              store.claim({
                scope: "noscript",
                key,
                fingerprint: "f",
                ttl: Duration.hours(1),
                lease: Duration.hours(1)
              }),
              (r) => r._tag
            ))
      ).pipe(Effect.provide(idempotencyStore))
      expect(yield* decide).toEqual(names.map(() => true))
      expect(yield* claim).toEqual(names.map(() => "Claimed"))
      yield* Effect.promise(() => Promise.all(masters.map((m) => m.script("FLUSH"))))
      // the second request of each window: counted on top of the first, so the state survived the flush
      expect(yield* decide).toEqual(names.map(() => true))
      expect(yield* decide).toEqual(names.map(() => false))
      expect(yield* claim).toEqual(names.map(() => "InProgress"))
    }))

  it.effect("a store given the Cluster's startup nodes (`cluster`) connects, decides, and closes its client when released", () =>
    Effect.gen(function*() {
      const { ports } = cluster.get()
      const layer = RateLimiterStoreRedis.layer({
        cluster: ports.map((port) => ({ host: "127.0.0.1", port })),
        expiryMargin: "1 minute"
      })
      const decisions = yield* Effect.flatMap(
        RateLimiterStore.RateLimiterStore,
        (store) =>
          Effect.forEach(
            ["a", "b", "c", "d"],
            (name) => store.tokenBucket("k", 2, { name: `startup-${name}`, capacity: 3, refillPerSecond: 1 }, 0)
          )
      ).pipe(
        Effect.provide(layer)
      )
      expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([[true, 1], [true, 1], [true, 1], [true, 1]])
      const idem = yield* Effect.flatMap(
        IdempotencyStore.IdempotencyStore,
        (store) =>
          store.claim({
            scope: "s",
            key: "startup",
            fingerprint: "f",
            ttl: Duration.hours(1),
            lease: Duration.hours(1)
          })
      ).pipe(Effect.provide(IdempotencyStoreRedis.layer({ cluster: [`redis://127.0.0.1:${ports[0]}`] })))
      expect(idem._tag).toBe("Claimed")
      expect(() => RateLimiterStoreRedis.layer({ cluster: [] })).toThrow(/non-empty/)
      expect(() => IdempotencyStoreRedis.layer({} as { url: string })).toThrow(/exactly one of client, url or cluster/)
      // a layer that owns its Cluster client closes it when released: its named connections are gone
      const { masters } = cluster.get()
      const connectionName = `owned-${process.pid}`
      const named = Effect.promise(() =>
        Promise.all(masters.map((m) => m.client("LIST") as Promise<string>)).then((lists) =>
          lists.flatMap((list) => list.split("\n")).filter((line) => line.includes(` name=${connectionName} `)).length
        )
      )
      const during = yield* Effect.flatMap(
        RateLimiterStore.RateLimiterStore,
        (store) =>
          Effect.zipRight(
            store.fixedWindow("k", 1, { name: "startup-close", limit: 1, windowMillis: 1000 }, 0),
            named
          )
      ).pipe(Effect.provide(RateLimiterStoreRedis.layer({
        cluster: [{ host: "127.0.0.1", port: ports[1]! }],
        clusterOptions: { redisOptions: { connectionName } }
      })))
      expect(during).toBeGreaterThan(0)
      yield* eventually(Effect.map(named, (n) => n === 0))
    }))
})
