/**
 * Failover on a real Redis Cluster with one replica per master (./support/redisCluster.ts, replicas mode,
 * `cluster-node-timeout` 1 s): what `waitReplicas` (`WAIT`) promises on the idempotency store and the stream
 * queue — a call counts as done only once a replica has its write, and a replica that lags makes it fail
 * instead —, what a failover keeps and what it costs with `waitReplicas` on, and the two failover faults of
 * `npm run faults` (examples/faults/redisFailover.ts, examples/faults/replicationLoss.ts).
 *
 * Real time throughout: the nodes are real processes, and every wait is on a condition (a node's view, a
 * replica's link, a count), never a guess.
 */
import { expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit } from "effect"
import type { Cluster } from "ioredis"
import { run as redisFailover } from "../../../examples/faults/redisFailover.js"
import { useServeProgram } from "../../../examples/faults/support.js"
import { redisReplicaLag } from "../examples/faults/replicationLoss.js"
import { nodeArgs, pkg } from "../examples/support/node.js"
import * as IdempotencyStoreRedis from "../src/IdempotencyStore/Redis.js"
import { IdempotencyStore } from "../src/index.js"
import { keyOf } from "../src/internal/idempotencyStore/redis.js"
import * as RedisStreamQueue from "../src/RedisStreamQueue.js"
import { survived } from "./support/faultRows.js"
import { type ClusterRef, describeRedisCluster } from "./support/redisCluster.js"

// the fault redis-failover starts this edition's `examples/serve.ts` as its servers
useServeProgram({ cwd: pkg, nodeArgs, serve: "examples/serve.ts" })

const run = `${process.pid}-${Date.now().toString(36)}`
let counter = 0
const fresh = (what: string) => `${what}-${run}-${++counter}`

const wait = { replicas: 1, timeout: "150 millis" } as const
/**
 * For the test where a live replica must acknowledge: a WAIT that a busy machine (2 CPUs, other suites running)
 * cannot answer in 150 ms would fail it for no fault of the store (as the Effect 4 edition's test does).
 */
const patient = { replicas: 1, timeout: "1 second" } as const

const request = (key: string): IdempotencyStore.ClaimRequest => ({
  scope: "failover",
  key,
  fingerprint: "f",
  ttl: Duration.hours(1),
  lease: Duration.minutes(10)
})
const stored = { status: 201, headers: {}, body: new Uint8Array([7]) }

const slotOf = (client: Cluster, key: string) => Effect.promise(() => client.cluster("KEYSLOT", key) as Promise<number>)

/** The master serving `key`'s slot and its replica, as the nodes see them now. */
const nodesOf = (cluster: ClusterRef, key: string) =>
  Effect.gen(function*() {
    const { client, nodes } = cluster.get()
    const slot = yield* slotOf(client, key)
    const master = yield* Effect.promise(() => nodes.masterOf(slot))
    const view = yield* Effect.promise(() => nodes.view())
    const id = view.find((n) => n.port === master)!.id
    const replica = view.find((n) => n.role === "replica" && n.masterId === id)?.port
    return { slot, master, replica }
  })

/** Runs `effect` with `port` stalled (SIGSTOP), resuming it however the effect ends. */
const stalled = <A, E, R>(cluster: ClusterRef, port: number, effect: Effect.Effect<A, E, R>) =>
  Effect.ensuring(
    Effect.zipRight(Effect.sync(() => cluster.get().nodes.signal(port, "SIGSTOP")), effect),
    Effect.sync(() => cluster.get().nodes.signal(port, "SIGCONT"))
  )

/** A field of a hash as the replica on `port` holds it (`READONLY`: a replica serves reads of its slots). */
const onReplica = (cluster: ClusterRef, port: number, key: string, field: string) =>
  Effect.promise(async () => {
    const replica = cluster.get().nodes.node(port)
    await replica.call("READONLY")
    return replica.hget(key, field)
  })

const notReplicated = (exit: Exit.Exit<unknown, unknown>, withinMs = 150) => {
  expect(Exit.isFailure(exit)).toBe(true)
  if (Exit.isSuccess(exit)) return
  const error = Cause.squash(exit.cause) as { readonly cause?: unknown }
  expect(String(error.cause)).toMatch(
    new RegExp(`NotReplicated: .* 0 of the 1 replicas asked for acknowledged it within ${withinMs} ms`)
  )
}

describeRedisCluster("Redis Cluster with a replica per master", (cluster) => {
  const waiting = cluster.layer((client) => IdempotencyStoreRedis.layer({ client, waitReplicas: wait }))
  const waitingPatiently = cluster.layer((client) => IdempotencyStoreRedis.layer({ client, waitReplicas: patient }))
  const plain = cluster.layer((client) => IdempotencyStoreRedis.layer({ client }))
  const withStores = <A, E, R>(
    body: (
      stores: { readonly waiting: IdempotencyStore.Store; readonly plain: IdempotencyStore.Store }
    ) => Effect.Effect<A, E, R>,
    waitingLayer = waiting
  ) =>
    Effect.flatMap(
      Effect.zip(
        Effect.provide(IdempotencyStore.IdempotencyStore, waitingLayer),
        Effect.provide(IdempotencyStore.IdempotencyStore, plain)
      ),
      ([w, p]) => body({ waiting: w, plain: p })
    )

  it.live("waitReplicas: claim, complete and renew count as done once the replica has them, and fail while it lags", () =>
    withStores(({ plain, waiting }) =>
      Effect.gen(function*() {
        const key = fresh("stall")
        const { replica } = yield* nodesOf(cluster, keyOf("idem:", "failover", key))
        // while the replica is stalled, the claim runs on the master but is reported failed: not replicated
        notReplicated(yield* stalled(cluster, replica!, Effect.exit(waiting.claim(request(key)))))
        expect((yield* plain.claim(request(key)))._tag).toBe("InProgress") // it was executed
        // the replica resumed: a claim, its renewal and its completion succeed, and the replica holds them
        const other = fresh("stall")
        const claimed = yield* waiting.claim(request(other))
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage(`claimed? ${claimed._tag}`)
        const ref = { scope: "failover", key: other, token: claimed.token }
        const otherReplica = (yield* nodesOf(cluster, keyOf("idem:", "failover", other))).replica!
        expect(yield* onReplica(cluster, otherReplica, keyOf("idem:", "failover", other), "tok")).toBe(claimed.token)
        expect(yield* waiting.renew(ref, Duration.minutes(10))).toBe(true)
        // a completion while its replica is stalled: executed, reported failed; a second try is refused (done)
        notReplicated(
          yield* stalled(cluster, otherReplica, Effect.exit(waiting.complete(ref, stored, Duration.hours(1))))
        )
        expect(yield* waiting.complete(ref, stored, Duration.hours(1))).toBe(false)
        expect(yield* onReplica(cluster, otherReplica, keyOf("idem:", "failover", other), "done")).toBe("1")
        const third = fresh("stall")
        const claimedThird = yield* waiting.claim(request(third))
        if (claimedThird._tag !== "Claimed") return yield* Effect.dieMessage(`claimed? ${claimedThird._tag}`)
        const ref3 = { scope: "failover", key: third, token: claimedThird.token }
        expect(yield* waiting.complete(ref3, stored, Duration.hours(1))).toBe(true)
        const thirdReplica = (yield* nodesOf(cluster, keyOf("idem:", "failover", third))).replica!
        expect(yield* onReplica(cluster, thirdReplica, keyOf("idem:", "failover", third), "done")).toBe("1")
        // a release is not waited for: it succeeds with the replica stalled
        const fourth = fresh("stall")
        const claimedFourth = yield* plain.claim(request(fourth))
        if (claimedFourth._tag !== "Claimed") return yield* Effect.dieMessage(`claimed? ${claimedFourth._tag}`)
        const fourthReplica = (yield* nodesOf(cluster, keyOf("idem:", "failover", fourth))).replica!
        yield* stalled(
          cluster,
          fourthReplica,
          waiting.release({ scope: "failover", key: fourth, token: claimedFourth.token })
        )
      })
    ))

  it.live("waitReplicas on RedisStreamQueue: a send counts as done once the replica has the entries", () =>
    Effect.gen(function*() {
      const redis = yield* cluster.connect()
      const stream = fresh("queue")
      const source = yield* RedisStreamQueue.make<number>({
        redis,
        stream,
        visibilityTimeout: "1 minute",
        waitReplicas: wait
      })
      const { replica } = yield* nodesOf(cluster, stream)
      const failed = yield* stalled(cluster, replica!, Effect.flip(source.send([{ id: "a", body: 1 }])))
      expect(failed.operation).toBe("send")
      expect(String(failed.cause)).toMatch(/NotReplicated/)
      yield* source.send([{ id: "b", body: 2 }, { id: "c", body: 3 }])
      // both sends are in the stream (the first was executed, only not confirmed), and on the replica
      const replicaClient = cluster.get().nodes.node(replica!)
      yield* Effect.promise(() => replicaClient.call("READONLY"))
      expect(yield* Effect.promise(() => replicaClient.xlen(stream))).toBe(3)
      const received = yield* source.receive(10)
      expect(received.map((m) => m.id)).toEqual(["a", "b", "c"])
      for (const m of received) expect(yield* source.ack(m)).toBe(true)
    }).pipe(Effect.scoped))

  it.live("waitReplicas follows a slot to its new master: while it migrates (ASK) and once it has moved (MOVED)", () =>
    withStores(({ waiting }) =>
      Effect.gen(function*() {
        const { client, nodes } = cluster.get()
        const key = fresh("move")
        const claimed = yield* waiting.claim(request(key))
        expect(claimed._tag).toBe("Claimed")
        const stream = fresh("move-queue")
        const redis = yield* cluster.connect()
        const source = yield* RedisStreamQueue.make<number>({
          redis,
          stream,
          visibilityTimeout: "1 minute",
          waitReplicas: wait
        })
        yield* source.send([{ id: "before", body: 0 }])
        for (const [name, record] of [["idempotency", keyOf("idem:", "failover", key)], ["queue", stream]] as const) {
          const slot = yield* slotOf(client, record)
          const view = yield* Effect.promise(() => nodes.view())
          const masters = view.filter((n) => n.role === "master" && n.slots.length > 0)
          const from = masters.find((n) => n.slots.some(([a, b]) => slot >= a && slot <= b))!
          const to = masters.find((n) => n !== from)!
          const call = (port: number, ...args: Array<string | number>) =>
            Effect.promise(() => nodes.node(port).call(...(args as [string, ...Array<string | number>])))
          yield* call(to.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.id)
          yield* call(from.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.id)
          const keys = (yield* call(from.port, "CLUSTER", "GETKEYSINSLOT", slot, 100)) as Array<string>
          yield* call(from.port, "MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", ...keys)
          // migrating: the old master answers ASK for the key, which is on the new one already
          if (name === "idempotency") expect((yield* waiting.claim(request(key)))._tag).toBe("InProgress")
          else yield* source.send([{ id: "migrating", body: 1 }])
          for (const master of [to, from, ...masters]) {
            yield* call(master.port, "CLUSTER", "SETSLOT", slot, "NODE", to.id)
          }
          // moved: the old master answers MOVED, and the client's map of the slots is out of date
          if (name === "idempotency") expect((yield* waiting.claim(request(key)))._tag).toBe("InProgress")
          else yield* source.send([{ id: "moved", body: 2 }])
        }
        expect((yield* source.receive(10)).map((m) => m.id)).toEqual(["before", "migrating", "moved"])
        yield* Effect.promise(() => nodes.healthy("the cluster settled after the moves"))
      })
    ).pipe(Effect.scoped))

  it("waitReplicas is checked when the layer or the queue is built", () => {
    const client = {} as Cluster
    const bad: ReadonlyArray<{ readonly replicas: number; readonly timeout: Duration.DurationInput }> = [
      { replicas: 0, timeout: 100 },
      { replicas: 1.5, timeout: 100 },
      { replicas: 1, timeout: 0 },
      { replicas: 1, timeout: "2 seconds" }
    ]
    for (const waitReplicas of bad) {
      expect(() => IdempotencyStoreRedis.layer({ client, waitReplicas })).toThrow(/waitReplicas/)
      const queue = { redis: client, stream: "s", visibilityTimeout: 1000, timeout: 2000, waitReplicas }
      expect(() => RedisStreamQueue.make(queue)).toThrow(/waitReplicas/)
    }
    // shorter than the store's own timeout (2 s by default, 5 s for the queue): a WAIT that runs out must be
    // answered before the call's deadline
    expect(() => IdempotencyStoreRedis.layer({ client, timeout: "500 millis", waitReplicas: wait })).not.toThrow()
    expect(() => IdempotencyStoreRedis.layer({ client, timeout: "100 millis", waitReplicas: wait })).toThrow(
      /shorter than the timeout \(100 ms\), got 150 ms/
    )
  })

  it.live(
    "a master SIGKILLed: its replica keeps every write waited for; until a replica is back, waitReplicas refuses its calls",
    () =>
      withStores(({ plain, waiting }) =>
        Effect.gen(function*() {
          const { nodes } = cluster.get()
          const keys = Array.from({ length: 12 }, () => fresh("kill"))
          const { master, slot } = yield* nodesOf(cluster, keyOf("idem:", "failover", keys[0]!))
          // completed records, each acknowledged by a replica, on every master
          for (const key of keys) {
            const claimed = yield* waiting.claim(request(key))
            if (claimed._tag !== "Claimed") return yield* Effect.dieMessage(`claimed? ${claimed._tag}`)
            const ref = { scope: "failover", key, token: claimed.token }
            expect(yield* waiting.complete(ref, stored, Duration.hours(1))).toBe(true)
          }
          yield* Effect.promise(() => nodes.kill(master))
          yield* Effect.promise(() => nodes.healthy("the replica promoted, the cluster ok without the killed master"))
          expect(yield* Effect.promise(() => nodes.masterOf(slot))).not.toBe(master)
          for (const key of keys) expect((yield* plain.claim(request(key)))._tag).toBe("Completed")
          // the promoted master has no replica: every call on its slots fails with waitReplicas, replays too
          notReplicated(yield* Effect.exit(waiting.claim(request(keys[0]!))), 1000)
          // the old master back: it rejoins as the replica of the promoted one, and calls are confirmed again
          yield* Effect.promise(() => nodes.restart(master))
          yield* Effect.promise(() => nodes.healthy("the old master rejoined as a replica"))
          expect((yield* waiting.claim(request(keys[0]!)))._tag).toBe("Completed")
          expect((yield* waiting.claim(request(fresh("kill"))))._tag).toBe("Claimed")
        }), waitingPatiently),
    60_000
  )

  it(
    "fault redis-failover: a master SIGKILLed under load, its replica promoted: nothing lost or duplicated",
    async () => {
      const rows = survived(await redisFailover())
      expect(rows).toHaveLength(1)
      const row = rows[0]!
      expect(row.offered).toBe(400)
      expect(row.notes).toMatch(/replica promoted \d+ ms after the kill/)
      expect(row.notes).toMatch(/breaker refused 0, fell back [1-9]/) // the breaker saw the outage, refused nothing
      expect(row.notes).toMatch(/resent after the lease: 400 replays/)
    },
    120_000
  )

  it("fault redis-replica-lag: what a lagging replica loses without waitReplicas, and nothing with it", async () => {
    const rows = survived(await redisReplicaLag.run())
    expect(rows).toHaveLength(1)
    const row = rows[0]!
    expect(row.notes).toMatch(/without: 1 kills, 1 with a loss/)
  }, 120_000)
}, { replicas: 1, nodeTimeoutMs: 1000 })
