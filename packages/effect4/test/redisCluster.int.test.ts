/**
 * `IdempotencyStore/Redis` against a real 3-master Redis Cluster, started once for this file (see
 * ./support/redisCluster.ts): the same contract suite as the single-node run, then what only a Cluster shows —
 * records spread over the nodes, every record's keys in one slot (asked of the server: `CLUSTER KEYSLOT`), a slot
 * moved to another master mid-run (`ASK`, `MOVED`), scripts reloaded node by node after `SCRIPT FLUSH`, a store
 * given the startup nodes; the stream queue's contract suite with its keys in one slot; and the fleet breaker's
 * contract suite (`CircuitBreaker/Redis`, its keyed registry included) with each breaker's keys in one slot. Ported
 * from the root's test/redisCluster.int.test.ts (its idempotency, stream queue and breaker parts; the rate limiter
 * comes with that backend). One more suite is one more line below.
 */
import { expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import type { Cluster, Redis } from "ioredis"
import * as IdempotencyStoreRedis from "../src/IdempotencyStore/Redis.js"
import { CircuitBreaker, IdempotencyStore } from "../src/index.js"
import { keysOf as breakerKeys, resolveFleet } from "../src/internal/circuitBreaker/redis.js"
import { keyOf } from "../src/internal/idempotencyStore/redis.js"
import { streamKeys } from "../src/internal/queue/redisStreamQueue.js"
import * as RedisStreamQueue from "../src/RedisStreamQueue.js"
import { breakerRedisSuite } from "./contract/breakerRedisSuite.js"
import { idempotencyStoreSuite } from "./contract/idempotencyStoreSuite.js"
import { redisStreamQueueSuite } from "./contract/queue/redisSuite.js"
import { eventually } from "./support/eventually.js"
import { describeRedisCluster } from "./support/redisCluster.js"

/** The slot the server assigns to a key. */
const slotOf = (client: Cluster, key: string): Promise<number> => client.cluster("KEYSLOT", key) as Promise<number>

const request = (key: string, scope = "s"): IdempotencyStore.ClaimRequest => ({
  scope,
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.hours(1)
})

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
  const idempotencyStore = cluster.layer((client) => IdempotencyStoreRedis.layer({ client }))
  const masters = () => cluster.get().ports.map((port) => cluster.get().nodes.node(port))

  idempotencyStoreSuite("redis cluster", idempotencyStore)
  // stream names without a hash tag: their derived keys share the stream's slot by construction
  let streams = 0
  redisStreamQueueSuite("redis cluster", {
    connect: cluster.connect(),
    freshStream: () => `queue-${++streams}`,
    soakMessages: Number(process.env.SOAK_N ?? 2_000)
  })
  // every replica on the shared Cluster client (the breaker never closes a client it was given)
  breakerRedisSuite("redis cluster", { connection: () => ({ client: cluster.get().client }), prefix: "cb:" })

  it.effect("a fleet breaker's keys are in one slot (a keyed registry's too, per key), and the breakers spread", () =>
    Effect.gen(function*() {
      const redis = cluster.get().client
      const trips = [
        CircuitBreaker.consecutive(3),
        CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { duration: "10 seconds" } }),
        CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { calls: 20 } })
      ]
      const slots = new Set<number>()
      for (const trip of trips) {
        for (const [name, key] of [["orders", undefined], ["{x}", "}{"], ["a:b", "tenant:{7}"], ["up", "c"]] as const) {
          const { config } = resolveFleet({ trip, openFor: "1 second", name, redis: { client: redis } })
          const keys = breakerKeys("cb:", name, config.trip, key)
          const both = yield* Effect.promise(() => Promise.all([keys.state, keys.window].map((k) => slotOf(redis, k))))
          expect(new Set(both).size).toBe(1)
          slots.add(both[0]!)
        }
      }
      // the name and the key decide the slot: four breakers, not one slot for all
      expect(slots.size).toBeGreaterThan(1)
    }))

  it.effect("stream keys: one slot with or without a hash tag; unchanged on one node; an untaggable name is rejected", () =>
    Effect.gen(function*() {
      const redis = cluster.get().client
      for (const stream of ["orders", "{orders}", "{tenant-1}.orders", "a{b", "x:y"]) {
        const k = streamKeys(stream, true)
        const slots = yield* Effect.promise(() =>
          Promise.all([k.stream, k.dlq, k.index, k.errors].map((key) => slotOf(redis, key)))
        )
        expect(new Set(slots).size).toBe(1)
      }
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
      // no hash tag and a "}" (or an empty tag "{}"): no key can share its slot by tag — loud at construction
      for (const stream of ["a}b", "x{}y"]) {
        expect(() => RedisStreamQueue.make({ redis, stream, visibilityTimeout: "1 second" })).toThrow(/hash tag/)
        expect(streamKeys(stream, false).dlq).toBe(`${stream}:dlq`)
      }
      expect(() => RedisStreamQueue.make({ redis, stream: "", visibilityTimeout: "1 second" })).toThrow(/non-empty/)
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

  it.effect("records spread over every master; a record's key is in the slot of its identity alone", () =>
    Effect.gen(function*() {
      const { client } = cluster.get()
      const before = yield* Effect.promise(() => Promise.all(masters().map((m) => m.dbsize())))
      yield* IdempotencyStore.IdempotencyStore.use((store) =>
        Effect.forEach(Array.from({ length: 30 }, (_, i) => `spread-${i}`), (key) => store.claim(request(key)))
      ).pipe(Effect.provide(idempotencyStore))
      const after = yield* Effect.promise(() => Promise.all(masters().map((m) => m.dbsize())))
      // 30 records over 3 masters: each gained some (a store that put every key in one slot would fail this)
      after.forEach((n, i) => expect(n).toBeGreaterThan(before[i]!))
      // the hash tag is the whole identity: the prefix does not move a record to another slot
      expect(yield* Effect.promise(() => slotOf(client, keyOf("idem:", "tenant:1", "k")))).toBe(
        yield* Effect.promise(() => slotOf(client, keyOf("other:", "tenant:1", "k")))
      )
    }))

  it.live("a slot moved to another master (ASK while it migrates, MOVED after): the record follows, state and all", () =>
    Effect.gen(function*() {
      const { client, ports } = cluster.get()
      const move = (key: string) =>
        Effect.promise(() => slotOf(client, key).then((slot) => beginMove(masters(), ports, slot)))
      const claimed = yield* IdempotencyStore.IdempotencyStore.use((store) =>
        Effect.gen(function*() {
          const first = yield* store.claim(request("moving"))
          if (first._tag !== "Claimed") return yield* Effect.die(`claimed? ${first._tag}`)
          const finish = yield* move(keyOf("idem:", "s", "moving"))
          const during = yield* store.claim(request("moving"))
          yield* Effect.promise(finish)
          const ref = { scope: "s", key: "moving", token: first.token }
          const completed = yield* store.complete(
            ref,
            { status: 201, headers: {}, body: new Uint8Array([1]) },
            Duration.hours(1)
          )
          const after = yield* store.claim(request("moving"))
          return [during._tag, completed, after._tag]
        })
      ).pipe(Effect.provide(idempotencyStore))
      expect(claimed).toEqual(["InProgress", true, "Completed"])
    }))

  it.live("a stream queue's slot moved to another master: the stream, its group, pending entries and dead letters follow", () =>
    Effect.gen(function*() {
      const { ports } = cluster.get()
      const redis = yield* cluster.connect()
      const stream = "moving-queue"
      const source = yield* RedisStreamQueue.make<number>({ redis, stream, visibilityTimeout: "1 minute" })
      yield* source.send([1, 2, 3].map((n) => ({ id: `m${n}`, body: n })))
      const [a] = yield* source.receive(1)
      const finish = yield* Effect.promise(() =>
        slotOf(redis, stream).then((slot) => beginMove(masters(), ports, slot))
      )
      const [b] = yield* source.receive(1) // one key, on the new master already: ASK, then served
      // a script over the stream and keys that do not exist yet (the DLQ, the errors): Redis answers TRYAGAIN
      // until the slot has moved, and the call fails once the client gave up, changing nothing
      expect((yield* Effect.flip(source.deadLetter(b!, "poison"))).operation).toBe("deadLetter")
      expect((yield* Effect.flip(source.ack(a!))).operation).toBe("ack")
      yield* Effect.promise(finish)
      // …and both work once it has: nothing of the failed calls was applied (a and b are still pending)
      expect(yield* source.deadLetter(b!, "poison")).toBe(true)
      expect(yield* source.ack(a!)).toBe(true)
      const [c] = yield* source.receive(5)
      expect(yield* source.ack(c!)).toBe(true)
      expect([a!.id, b!.id, c!.id]).toEqual(["m1", "m2", "m3"])
      expect((yield* source.deadLetters.list()).map((d) => d.id)).toEqual(["m2"])
      expect(yield* Effect.promise(() => redis.xlen(stream))).toBe(0)
    }))

  it.effect("the store reloads its scripts node by node after SCRIPT FLUSH on every master (NOSCRIPT)", () =>
    Effect.gen(function*() {
      const names = Array.from({ length: 12 }, (_, i) => `noscript-${i}`)
      const claim = IdempotencyStore.IdempotencyStore.use((store) =>
        Effect.forEach(names, (key) => Effect.map(store.claim(request(key, "noscript")), (r) => r._tag))
      ).pipe(Effect.provide(idempotencyStore))
      expect(yield* claim).toEqual(names.map(() => "Claimed"))
      yield* Effect.promise(() => Promise.all(masters().map((m) => m.script("FLUSH"))))
      // the claims are still there after the flush: the reloaded script sees them in progress
      expect(yield* claim).toEqual(names.map(() => "InProgress"))
    }))

  it.effect("a store given the Cluster's startup nodes (`cluster`) connects, claims, and closes its client when released", () =>
    Effect.gen(function*() {
      const { ports } = cluster.get()
      const connectionName = `owned-e4-${process.pid}`
      const named = Effect.promise(() =>
        Promise.all(masters().map((m) => m.client("LIST") as Promise<string>)).then((lists) =>
          lists.flatMap((list) => list.split("\n")).filter((line) => line.includes(` name=${connectionName} `)).length
        )
      )
      const [claimed, during] = yield* IdempotencyStore.IdempotencyStore.use((store) =>
        Effect.zip(
          Effect.map(store.claim(request(`startup-${process.pid}`)), (r) => r._tag),
          named
        )
      ).pipe(Effect.provide(IdempotencyStoreRedis.layer({
        cluster: [{ host: "127.0.0.1", port: ports[1]! }],
        clusterOptions: { redisOptions: { connectionName } }
      })))
      expect(claimed).toBe("Claimed")
      expect(during).toBeGreaterThan(0)
      yield* eventually(Effect.map(named, (n) => n === 0))
      expect(() => IdempotencyStoreRedis.layer({ cluster: [] })).toThrow(/non-empty/)
    }))
})
