/**
 * A real Redis Cluster for one integration test file: 3 masters, with `replicas` replicas each (default 0),
 * started by the repository's examples/faults/cluster.ts (plain Node and ioredis, no Effect import: shared by
 * both editions; see the root's test/support/redisCluster.ts). Started in the file's `beforeAll`, stopped in its
 * `afterAll`.
 *
 * The clients handed to the stores are made here, from this package's own ioredis (the stores tell a Cluster
 * from one node by `isCluster`, so a client of the root's copy works too: the Effect 3 edition's tests use those).
 * The launcher's per-node clients (`nodes.node(port)`) are the root's, used only to inspect and to steer nodes.
 *
 * Without the binaries (`redis-server`, `redis-cli` on PATH) the file is skipped locally with a note and fails
 * in CI (`CI=true`), as a missing service does (./services.ts).
 */
import { describe, it } from "@effect/vitest"
import { Effect, Layer, type Scope } from "effect"
import { Cluster, type ClusterOptions } from "ioredis"
import { afterAll, beforeAll } from "vitest"
import { missingBinaries, type RunningCluster, startCluster } from "../../../../examples/faults/cluster.js"
import { inCI } from "./services.js"

export interface RedisCluster {
  /** The masters' client ports, as started. */
  readonly ports: ReadonlyArray<number>
  /** The file's shared client (closed when the file ends): pass it to the stores as `{ client }`. */
  readonly client: Cluster
  /** Every node, masters and replicas: their views, and kill, stall and restart. */
  readonly nodes: RunningCluster
}

export interface ClusterRef {
  /** The running cluster; only inside tests and hooks (throws before the file's `beforeAll` ran). */
  readonly get: () => RedisCluster
  /** A layer made from the shared client when a test builds it. */
  readonly layer: <A, E, R>(make: (client: Cluster) => Layer.Layer<A, E, R>) => Layer.Layer<A, E, R>
  /** A new Cluster client (ready), closed with the scope. */
  readonly connect: (options?: ClusterOptions) => Effect.Effect<Cluster, never, Scope.Scope>
}

/** A Cluster client of this package's ioredis on every node, once it has loaded the slots. */
const readyClient = (nodes: RunningCluster, options: ClusterOptions = {}): Promise<Cluster> => {
  const client = new Cluster(nodes.ports.map((port) => ({ host: "127.0.0.1", port })), options)
  client.on("error", () => {})
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the Cluster client was not ready within 30 s")), 30_000)
    client.once("ready", () => {
      clearTimeout(timer)
      resolve(client)
    })
  })
}

const close = (client: Cluster) => client.quit().catch(() => undefined).finally(() => client.disconnect())

export const describeRedisCluster = (
  name: string,
  body: (cluster: ClusterRef) => void,
  options: { readonly replicas?: number; readonly nodeTimeoutMs?: number } = {}
) => {
  const missing = missingBinaries()
  if (missing !== undefined) {
    if (inCI) {
      return describe(name, () => {
        it("needs redis-server and redis-cli (CI=true: a missing binary fails the run)", () => {
          throw new Error(`cannot start a Redis Cluster: ${missing}`)
        })
      })
    }
    console.warn(`${name}: skipped — ${missing} (install redis-server, which brings redis-cli)`)
    return describe.skip(name, () => body(unstarted))
  }
  let running: RedisCluster | undefined
  const get = () => {
    if (running === undefined) throw new Error("the Redis Cluster is not running (used outside a test?)")
    return running
  }
  const ref: ClusterRef = {
    get,
    layer: (make) => Layer.unwrap(Effect.sync(() => make(get().client))),
    connect: (clientOptions) =>
      Effect.acquireRelease(
        Effect.promise(() => readyClient(get().nodes, clientOptions)),
        (c) => Effect.promise(() => close(c))
      )
  }
  return describe(name, () => {
    beforeAll(async () => {
      const nodes = await startCluster({ masters: 3, ...options })
      try {
        running = { ports: nodes.masterPorts, client: await readyClient(nodes), nodes }
      } catch (error) {
        await nodes.stop()
        throw error
      }
    }, 90_000)
    afterAll(async () => {
      if (running !== undefined) {
        await close(running.client)
        await running.nodes.stop()
      }
      running = undefined
    }, 30_000)
    body(ref)
  })
}

const unstarted: ClusterRef = {
  get: () => {
    throw new Error("skipped: no Redis Cluster")
  },
  layer: (make) => Layer.unwrap(Effect.sync(() => make(unstarted.get().client))),
  connect: () => Effect.sync(() => unstarted.get().client)
}
