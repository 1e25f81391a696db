/**
 * How often a failover loses a write Redis acknowledged, and what `waitReplicas` (`WAIT`) changes: the rounds,
 * figures and fault are ./replicaLag.ts (plain Node, shared with the Effect 4 edition); this file gives them the
 * Effect 3 edition's `IdempotencyStore/Redis` and `RedisStreamQueue`.
 *
 *   node --import tsx examples/faults/replicationLoss.ts [--kills 20] [--stall] [--wait-replicas <ms>]
 *
 * The `redis-replica-lag` fault of `npm run faults` runs two stalled rounds, without and with `waitReplicas`.
 */
import { Duration, Layer, ManagedRuntime } from "effect"
import { IdempotencyStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { pathToFileURL } from "node:url"
import type { RunningCluster } from "../../../../examples/faults/cluster.js"
import {
  describe,
  lossCli,
  type LossFigures,
  type LossOptions,
  measure as measureWith,
  type OpenWrites,
  replicaLagFault
} from "../../../../examples/faults/replicaLag.js"

export { describe, type LossFigures, type LossOptions }

const lease = Duration.hours(1)

/** The Effect 3 edition's writes: one runtime for the queue's sends, one holding the store's layer. */
export const openWrites: OpenWrites = async (client, waitReplicas) => {
  const wait = waitReplicas === undefined ? {} : { waitReplicas }
  const runtime = ManagedRuntime.make(Layer.empty)
  const storeRuntime = ManagedRuntime.make(IdempotencyStoreRedis.layer({ client, ...wait }))
  const store = await storeRuntime.runPromise(IdempotencyStore.IdempotencyStore)
  return {
    claim: (key) => runtime.runPromise(store.claim({ scope: "loss", key, fingerprint: "f", ttl: lease, lease })),
    complete: (key, token) =>
      runtime.runPromise(store.complete({ scope: "loss", key, token }, {
        status: 201,
        headers: {},
        body: new Uint8Array([1])
      }, lease)),
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
      return (id, body) => runtime.runPromise(source.send([{ id, body }]))
    },
    dispose: async () => {
      await storeRuntime.dispose()
      await runtime.dispose()
    }
  }
}

/** Runs the rounds on `on` (a Cluster with one replica per master, left running), or on a Cluster of its own. */
export const measure = (options: LossOptions = {}, on?: RunningCluster): Promise<LossFigures> =>
  measureWith(openWrites, options, on)

/** Fault "redis-replica-lag" (./replicaLag.ts) on the Effect 3 edition. */
export const redisReplicaLag = replicaLagFault(openWrites)

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await lossCli(openWrites)
