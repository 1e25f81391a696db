/**
 * A real Redis Cluster for one integration test file: 3 masters, with `replicas` replicas each (default 0),
 * started by examples/faults/cluster.ts (`redis-server --cluster-enabled yes` on free 127.0.0.1 ports, joined
 * by `redis-cli --cluster create`, ready once every node reports `cluster_state:ok` with all 16384 slots, every
 * node known and every replica in sync). Started in the file's `beforeAll`, stopped (processes killed,
 * directory removed) in its `afterAll` — and also when the start fails half way, or the test process exits
 * without `afterAll`.
 *
 * One cluster per file, shared by every suite the file registers: adding a suite is one line in the body of
 * `describeRedisCluster` (see test/redisCluster.int.test.ts). Suites take layers, registered before the cluster
 * exists: `cluster.layer(f)` builds `f(sharedClient)` only when a test provides it. With replicas, `nodes`
 * kills, stalls and restarts nodes for failover tests (test/redisFailover.int.test.ts).
 *
 * Without the binaries (`redis-server`, `redis-cli` on PATH) the file is skipped locally with a note and fails
 * in CI (`CI=true`), as a missing service does (./services.ts).
 */
import { describe, it } from "@effect/vitest"
import { Effect, Layer, type Scope } from "effect"
import type { Cluster, ClusterOptions, Redis } from "ioredis"
import { afterAll, beforeAll } from "vitest"
import { missingBinaries, ready, type RunningCluster, startCluster } from "../../../../examples/faults/cluster.js"

export interface RedisCluster {
  /** The masters' client ports, as started. */
  readonly ports: ReadonlyArray<number>
  /** The file's shared client (closed when the file ends): pass it to the stores as `{ client }`. */
  readonly client: Cluster
  /** A new Cluster client, closed with the scope. */
  readonly connect: (options?: ClusterOptions) => Effect.Effect<Cluster, never, Scope.Scope>
  /** One plain client per master as started (closed when the file ends), e.g. for `SCRIPT FLUSH` on every node. */
  readonly masters: ReadonlyArray<Redis>
  /** Every node, masters and replicas: their views, and kill, stall and restart. */
  readonly nodes: RunningCluster
}

export interface ClusterRefOptions {
  /** Replicas per master (default 0). */
  readonly replicas?: number
  /** `cluster-node-timeout` in milliseconds (default 5,000). */
  readonly nodeTimeoutMs?: number
}

/** What a suite registered before the cluster exists can hold on to. */
export interface ClusterRef {
  /** The running cluster; only inside tests and hooks (throws before the file's `beforeAll` ran). */
  readonly get: () => RedisCluster
  /** A layer made from the shared client when a test builds it. */
  readonly layer: <A, E, R>(make: (client: Cluster) => Layer.Layer<A, E, R>) => Layer.Layer<A, E, R>
  /** A new Cluster client, closed with the scope. */
  readonly connect: (options?: ClusterOptions) => Effect.Effect<Cluster, never, Scope.Scope>
}

const inCI = process.env.CI === "true" || process.env.CI === "1"

interface Running {
  readonly cluster: RedisCluster
  readonly stop: () => Promise<void>
}

/** Starts the cluster and the file's clients; everything is stopped again if a step fails. */
const start = async (options: ClusterRefOptions): Promise<Running> => {
  const nodes = await startCluster({ masters: 3, ...options })
  const clients: Array<Cluster> = []
  const stop = async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => undefined)))
    clients.forEach((c) => c.disconnect())
    await nodes.stop()
  }
  try {
    const client = nodes.connect()
    clients.push(client)
    await ready(client)
    const connect = (clientOptions?: ClusterOptions) =>
      Effect.acquireRelease(
        Effect.promise(() => ready(nodes.connect(clientOptions))),
        (c) =>
          Effect.promise(() => c.quit().catch(() => undefined)).pipe(Effect.ensuring(Effect.sync(() => c.disconnect())))
      )
    const ports = nodes.masterPorts
    return { cluster: { ports, client, connect, masters: ports.map(nodes.node), nodes }, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/**
 * Registers `body` with a cluster started once for it (before its first test) and stopped after its last.
 * Skipped locally without the binaries (with a note); in CI a missing binary fails the run.
 */
export const describeRedisCluster = (
  name: string,
  body: (cluster: ClusterRef) => void,
  options: ClusterRefOptions = {}
) => {
  const missing = missingBinaries()
  if (missing !== undefined) {
    if (inCI) {
      return describe(name, () => {
        it("needs redis-server and redis-cli (CI=true: a missing binary fails the run)", () => {
          throw new Error(`cannot start a Redis Cluster: ${missing} (.ci/run installs redis-server)`)
        })
      })
    }
    console.warn(`${name}: skipped — ${missing} (install redis-server, which brings redis-cli)`)
    return describe.skip(name, () => body(unstarted))
  }
  let running: Running | undefined
  const get = () => {
    if (running === undefined) throw new Error("the Redis Cluster is not running (used outside a test?)")
    return running.cluster
  }
  const ref: ClusterRef = {
    get,
    layer: (make) => Layer.unwrapEffect(Effect.sync(() => make(get().client))),
    connect: (options) => Effect.suspend(() => get().connect(options))
  }
  return describe(name, () => {
    beforeAll(async () => {
      const started = performance.now()
      running = await start(options)
      const millis = Math.round(performance.now() - started)
      const replicas = options.replicas ?? 0
      console.log(
        `[redis cluster] 3 masters on ${running.cluster.ports.join(", ")}` +
          `${replicas > 0 ? `, ${replicas} replica(s) each` : ""}, ready in ${millis} ms`
      )
    }, 90_000)
    afterAll(async () => {
      await running?.stop()
      running = undefined
    }, 30_000)
    body(ref)
  })
}

const unstarted: ClusterRef = {
  get: () => {
    throw new Error("skipped: no Redis Cluster")
  },
  layer: (make) => Layer.unwrapEffect(Effect.sync(() => make(unstarted.get().client))),
  connect: () => Effect.sync(() => unstarted.get().client)
}
