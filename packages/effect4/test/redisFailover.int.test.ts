/**
 * `waitReplicas` (`WAIT`) of `IdempotencyStore/Redis` on a real Redis Cluster with one replica per master
 * (./support/redisCluster.ts, `cluster-node-timeout` 1 s): a call counts as done only once a replica has its
 * write, and a replica that lags makes it fail instead; the `WAIT` follows a slot that moves; a master SIGKILLed
 * keeps every write waited for, and a replica that lags when its master dies loses what the master alone
 * acknowledged; under load, the middleware over the store makes every order once through a failover. Ported from
 * the root's test/redisFailover.int.test.ts (its idempotency parts; the stream queue comes later). Its two
 * `npm run faults` scenarios run the root's examples in processes of their own; here their idempotency parts
 * run in this process: one round of `redis-replica-lag` (examples/faults/replicationLoss.ts) on the store, and
 * `redis-failover` (examples/faults/redisFailover.ts) without its rate limiter, fleet breaker and stream queue.
 *
 * Real time throughout: the nodes are real processes, and every wait is on a condition (a node's view, a
 * replica's link), never a guess.
 */
import { expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Logger } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Cluster } from "ioredis"
import * as IdempotencyStoreRedis from "../src/IdempotencyStore/Redis.js"
import { IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { keyOf } from "../src/internal/idempotencyStore/redis.js"
import { post, type Reply, serveNode } from "./support/nodeServer.js"
import { type ClusterRef, describeRedisCluster } from "./support/redisCluster.js"

const run = `${process.pid}-${Date.now().toString(36)}`
let counter = 0
const fresh = (what: string) => `${what}-${run}-${++counter}`

const wait = { replicas: 1, timeout: "150 millis" } as const
/**
 * For the test where a live replica must acknowledge: a WAIT that a busy machine (2 CPUs, other suites running)
 * cannot answer in 150 ms would fail it for no fault of the store.
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
const record = (key: string) => keyOf("idem:", "failover", key)

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
    Effect.andThen(Effect.sync(() => cluster.get().nodes.signal(port, "SIGSTOP")), effect),
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
  const error = Cause.squash(exit.cause) as { readonly _tag?: string; readonly cause?: unknown }
  expect(error._tag).toBe("IdempotencyStoreError")
  expect(String(error.cause)).toMatch(
    new RegExp(`NotReplicated: .* 0 of the 1 replicas asked for acknowledged it within ${withinMs} ms`)
  )
}

const claimedRef = (store: IdempotencyStore.Store, key: string) =>
  Effect.flatMap(store.claim(request(key)), (claimed) =>
    claimed._tag === "Claimed"
      ? Effect.succeed({ scope: "failover", key, token: claimed.token })
      : Effect.die(`claimed? ${claimed._tag}`))

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
        IdempotencyStore.IdempotencyStore.use(Effect.succeed).pipe(Effect.provide(waitingLayer)),
        IdempotencyStore.IdempotencyStore.use(Effect.succeed).pipe(Effect.provide(plain))
      ),
      ([w, p]) => body({ waiting: w, plain: p })
    )

  it.live("waitReplicas: claim, complete and renew count as done once the replica has them, and fail while it lags", () =>
    withStores(({ plain, waiting }) =>
      Effect.gen(function*() {
        const key = fresh("stall")
        const { replica } = yield* nodesOf(cluster, record(key))
        // while the replica is stalled, the claim runs on the master but is reported failed: not replicated
        notReplicated(yield* stalled(cluster, replica!, Effect.exit(waiting.claim(request(key)))))
        expect((yield* plain.claim(request(key)))._tag).toBe("InProgress") // it was executed
        // the replica resumed: a claim, its renewal and its completion succeed, and the replica holds them
        const other = fresh("stall")
        const ref = yield* claimedRef(waiting, other)
        const otherReplica = (yield* nodesOf(cluster, record(other))).replica!
        expect(yield* onReplica(cluster, otherReplica, record(other), "tok")).toBe(ref.token)
        expect(yield* waiting.renew(ref, Duration.minutes(10))).toBe(true)
        // a completion while its replica is stalled: executed, reported failed; a second try is refused (done)
        notReplicated(
          yield* stalled(cluster, otherReplica, Effect.exit(waiting.complete(ref, stored, Duration.hours(1))))
        )
        expect(yield* waiting.complete(ref, stored, Duration.hours(1))).toBe(false)
        expect(yield* onReplica(cluster, otherReplica, record(other), "done")).toBe("1")
        // a completion with its replica running counts as done, and the replica has it
        const third = fresh("stall")
        const ref3 = yield* claimedRef(waiting, third)
        expect(yield* waiting.complete(ref3, stored, Duration.hours(1))).toBe(true)
        const thirdReplica = (yield* nodesOf(cluster, record(third))).replica!
        expect(yield* onReplica(cluster, thirdReplica, record(third), "done")).toBe("1")
        // a release is not waited for: it succeeds with the replica stalled
        const fourth = fresh("stall")
        const ref4 = yield* claimedRef(plain, fourth)
        yield* stalled(cluster, (yield* nodesOf(cluster, record(fourth))).replica!, waiting.release(ref4))
      })
    ))

  it.live("waitReplicas follows a slot to its new master: while it migrates (ASK) and once it has moved (MOVED)", () =>
    withStores(({ waiting }) =>
      Effect.gen(function*() {
        const { client, nodes } = cluster.get()
        const key = fresh("move")
        expect((yield* waiting.claim(request(key)))._tag).toBe("Claimed")
        const slot = yield* slotOf(client, record(key))
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
        expect((yield* waiting.claim(request(key)))._tag).toBe("InProgress")
        for (const master of [to, from, ...masters]) yield* call(master.port, "CLUSTER", "SETSLOT", slot, "NODE", to.id)
        // moved: the old master answers MOVED, and the client's map of the slots is out of date
        expect((yield* waiting.claim(request(key)))._tag).toBe("InProgress")
        const ref = { scope: "failover", key, token: "not-the-owner" }
        expect(yield* waiting.complete(ref, stored, Duration.hours(1))).toBe(false)
        yield* Effect.promise(() => nodes.healthy("the cluster settled after the move"))
      })
    ))

  it("waitReplicas is checked when the layer is built", () => {
    const client = {} as Cluster
    const bad: ReadonlyArray<{ readonly replicas: number; readonly timeout: Duration.Input }> = [
      { replicas: 0, timeout: 100 },
      { replicas: 1.5, timeout: 100 },
      { replicas: 1, timeout: 0 },
      { replicas: 1, timeout: "2 seconds" }
    ]
    for (const waitReplicas of bad) {
      expect(() => IdempotencyStoreRedis.layer({ client, waitReplicas })).toThrow(/waitReplicas/)
    }
    // shorter than the store's own timeout (2 s by default): a WAIT that runs out is answered before the deadline
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
          const { master, slot } = yield* nodesOf(cluster, record(keys[0]!))
          // completed records, each acknowledged by a replica, on every master
          for (const key of keys) {
            const ref = yield* claimedRef(waiting, key)
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

  it.live(
    "a replica lagging when its master dies: what the master alone acknowledged is lost, what waitReplicas did is not",
    () =>
      withStores(({ plain, waiting }) =>
        Effect.gen(function*() {
          const { client, nodes } = cluster.get()
          const first = fresh("lag")
          const { master, replica, slot } = yield* nodesOf(cluster, record(first))
          /** A fresh key whose record lives on `master`. */
          const onMaster = Effect.gen(function*() {
            for (;;) {
              const key = fresh("lag")
              const port = yield* Effect.promise(async () =>
                nodes.masterOf(await client.cluster("KEYSLOT", record(key)) as number)
              )
              if (port === master) return key
            }
          })
          const kept = yield* claimedRef(waiting, yield* onMaster) // acknowledged by the replica
          const lost = yield* onMaster
          const refused = yield* onMaster
          const filler = `${record(first)}:filler` // the same slot: the same master
          yield* stalled(
            cluster,
            replica!,
            Effect.gen(function*() {
              // more than the kernel's socket buffers hold between the master and its stalled replica: what the
              // master takes from now on is in its own memory only
              yield* Effect.promise(() => client.set(filler, Buffer.alloc(48 * 1024 * 1024, 1)))
              expect((yield* plain.claim(request(lost)))._tag).toBe("Claimed") // acknowledged by the master alone
              notReplicated(yield* Effect.exit(waiting.claim(request(refused))), 1000) // run, reported not replicated
              yield* Effect.promise(() => nodes.kill(master))
            })
          ) // the replica resumes here, behind its dead master
          yield* Effect.promise(() => nodes.healthy("the lagging replica promoted"))
          expect(yield* Effect.promise(() => nodes.masterOf(slot))).not.toBe(master)
          // without waitReplicas, an acknowledged claim is gone: a retry of its request would run the handler again
          expect((yield* plain.claim(request(lost)))._tag).toBe("Claimed")
          // with it, the call that met the lag failed, and what it did acknowledge is there
          expect((yield* plain.claim(request(kept.key)))._tag).toBe("InProgress")
          expect((yield* plain.claim(request(refused)))._tag).toBe("Claimed") // never acknowledged, so never promised
          yield* Effect.promise(() => client.del(filler))
          yield* Effect.promise(() => nodes.restart(master))
          yield* Effect.promise(() => nodes.healthy("the old master rejoined as a replica"))
        }), waitingPatiently),
    120_000
  )

  it.live(
    "a master SIGKILLed under load, its replica promoted: every order once, its answer replayed after the lease",
    () => {
      const logs: Array<string> = []
      return Effect.gen(function*() {
        // the root's redis-failover fault, its idempotency part in this process: orders through the middleware
        // over the store on the Cluster (no waitReplicas), each sent again with its key until a 201
        const { nodes } = cluster.get()
        const committed = new Map<string, number>()
        const handler = Effect.gen(function*() {
          const key = (yield* HttpServerRequest.HttpServerRequest).headers["idempotency-key"] ?? ""
          committed.set(key, (committed.get(key) ?? 0) + 1) // the commit
          return HttpServerResponse.jsonUnsafe({ order: key, n: committed.size }, { status: 201 })
        })
        const port = yield* serveNode(handler.pipe(yield* IdempotencyMiddleware.make({ lease: "3 seconds" })))
        const keys = Array.from({ length: 200 }, () => fresh("load"))
        const { master, slot } = yield* nodesOf(cluster, record(keys[0]!))
        const refused = new Map<number, number>()
        let done = 0
        const untilCreated = (key: string) =>
          Effect.gen(function*() {
            for (let attempt = 1; attempt <= 300; attempt++) {
              const exit = yield* Effect.exit(post(port, "/orders", { key }))
              const reply: Reply = Exit.isSuccess(exit) ? exit.value : { status: 0, headers: {}, body: "" }
              if (reply.status === 201) {
                done++
                return reply
              }
              refused.set(reply.status, (refused.get(reply.status) ?? 0) + 1)
              // 503 (store unavailable) or 409 (in progress, Retry-After): wait a little, at most 300 ms
              yield* Effect.sleep(Duration.millis(Math.min(300, 20 * 2 ** Math.min(attempt, 4))))
            }
            return yield* Effect.die(new Error(`${key}: no 201 in 300 attempts`))
          })
        const load = Effect.forEach(keys, untilCreated, { concurrency: 12 })
        const fault = Effect.gen(function*() {
          while (done < keys.length * 0.4) yield* Effect.sleep("10 millis")
          yield* Effect.promise(() => nodes.kill(master))
          yield* Effect.promise(() => nodes.healthy("the replica promoted, the cluster ok without the killed master"))
          expect(yield* Effect.promise(() => nodes.masterOf(slot))).not.toBe(master)
          yield* Effect.promise(() => nodes.restart(master))
          yield* Effect.promise(() => nodes.healthy("the old master rejoined as a replica"))
        })
        const [first] = yield* Effect.all([load, fault], { concurrency: 2 })
        const late = logs.filter((line) => line.includes("answer was recorded at attempt")).length
        console.log(
          `200 orders through a failover: refusals ${JSON.stringify(Object.fromEntries(refused))}, ` +
            `${late} answers recorded late`
        )
        // every order committed exactly once, and its client saw it created
        expect(first).toHaveLength(keys.length)
        expect(keys.filter((key) => committed.get(key) !== 1)).toEqual([])
        expect(committed.size).toBe(keys.length)
        // after the lease of any claim left in progress, each order once more: the first answer, replayed
        yield* Effect.sleep("3 seconds")
        const again = yield* Effect.forEach(keys, untilCreated, { concurrency: 12 })
        const notReplays = keys.filter((_, i) =>
          again[i]!.headers["idempotent-replayed"] !== "true" || again[i]!.body !== first[i]!.body
        )
        expect(notReplays).toEqual([])
        expect(keys.filter((key) => committed.get(key) !== 1)).toEqual([])
      }).pipe(
        Effect.provide(plain),
        // the middleware's warnings of the outage, kept out of the test's output
        Effect.provide(Logger.layer([Logger.make(({ message }) => void logs.push(String(message)))]))
      )
    },
    120_000
  )
}, { replicas: 1, nodeTimeoutMs: 1000 })
