/**
 * The Effect 4 edition of the root's examples/faults/replicationLoss.ts: the rounds, figures and fault of
 * examples/faults/replicaLag.ts (plain Node, the root's) over this edition's `IdempotencyStore/Redis` and
 * `RedisStreamQueue`.
 *
 *   node <this edition's node arguments> examples/faults/replicationLoss.ts [--kills 20] [--stall] [--wait-replicas <ms>]
 */
import { Duration, Layer, ManagedRuntime } from "effect"
import { IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { pathToFileURL } from "node:url"
import { lossCli, type OpenWrites, replicaLagFault } from "../../../../examples/faults/replicaLag.js"

const lease = Duration.hours(1)

/** A failure as the rounds count it: its text names its cause (`NotReplicated: …` when `WAIT` fell short). */
const described = (error: unknown): never => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? `: ${String(error.cause)}` : ""
  throw new Error(`${String(error)}${cause}`)
}

/** This edition's writes: one runtime for the queue's sends, one holding the store's layer. */
export const openWrites: OpenWrites = async (client, waitReplicas) => {
  const wait = waitReplicas === undefined ? {} : { waitReplicas }
  const runtime = ManagedRuntime.make(Layer.empty)
  const storeRuntime = ManagedRuntime.make(IdempotencyStoreRedis.layer({ client, ...wait }))
  const store = await storeRuntime.runPromise(IdempotencyStore.IdempotencyStore)
  return {
    claim: (key) =>
      runtime.runPromise(store.claim({ scope: "loss", key, fingerprint: "f", ttl: lease, lease })).catch(described),
    complete: (key, token) =>
      runtime.runPromise(store.complete({ scope: "loss", key, token }, {
        status: 201,
        headers: {},
        body: new Uint8Array([1])
      }, lease)).catch(described),
    sender: async (stream) => {
      const source = await runtime.runPromise(
        RedisStreamQueue.make<number>({
          redis: client,
          stream,
          visibilityTimeout: "1 minute",
          timeout: "2 seconds",
          ...wait
        })
      )
      return (id, body) => runtime.runPromise(source.send([{ id, body }])).catch(described)
    },
    dispose: async () => {
      await storeRuntime.dispose()
      await runtime.dispose()
    }
  }
}

/** Fault "redis-replica-lag" on this edition. */
export const redisReplicaLag = replicaLagFault(openWrites)

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await lossCli(openWrites)
