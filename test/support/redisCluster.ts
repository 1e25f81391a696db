/**
 * A real 3-master Redis Cluster for one integration test file: `redis-server --cluster-enabled yes` on free
 * 127.0.0.1 ports (each with its bus port, +10000, free too), joined by `redis-cli --cluster create`, ready
 * once every node reports `cluster_state:ok` with all 16384 slots and the 3 nodes known. Started in the
 * file's `beforeAll`, stopped (processes killed, directory removed) in its `afterAll` — and also when the
 * start fails half way, or the test process exits without `afterAll`.
 *
 * One cluster per file, shared by every suite the file registers: adding a suite is one line in the body of
 * `describeRedisCluster` (see test/redisCluster.test.ts). Suites take layers, registered before the cluster
 * exists: `cluster.layer(f)` builds `f(sharedClient)` only when a test provides it.
 *
 * Without the binaries (`redis-server`, `redis-cli` on PATH) the file is skipped locally with a note and fails
 * in CI (`CI=true`), as a missing service does (./services.ts).
 */
import { describe, it } from "@effect/vitest"
import { Effect, Layer, type Scope } from "effect"
import { Cluster, type ClusterOptions, Redis } from "ioredis"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { eventually } from "./eventually.js"

const HOST = "127.0.0.1"
const MASTERS = 3
const SLOTS = 16384

export interface RedisCluster {
  /** The masters' client ports. */
  readonly ports: ReadonlyArray<number>
  /** The file's shared client (closed when the file ends): pass it to the stores as `{ client }`. */
  readonly client: Cluster
  /** A new Cluster client, closed with the scope. */
  readonly connect: (options?: ClusterOptions) => Effect.Effect<Cluster, never, Scope.Scope>
  /** One plain client per master (closed when the file ends), e.g. for `SCRIPT FLUSH` on every node. */
  readonly masters: ReadonlyArray<Redis>
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

/** Why the binaries cannot be used, or `undefined`. */
const missingBinaries = (): string | undefined => {
  for (const binary of ["redis-server", "redis-cli"]) {
    const probe = spawnSync(binary, ["--version"], { encoding: "utf8" })
    if (probe.error !== undefined || probe.status !== 0) {
      return `${binary}: ${probe.error?.message ?? `exit ${probe.status}: ${probe.stderr}`}`
    }
  }
  return undefined
}

/** Whether nothing listens on `port` of 127.0.0.1 (bound for a moment, then closed). */
const bindable = (port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(undefined))
    server.listen(port, HOST, () => {
      const address = server.address()
      const bound = typeof address === "object" && address !== null ? address.port : undefined
      server.close(() => resolve(bound))
    })
  })

/** A client port chosen by the OS whose cluster bus port (+10000) is free as well. */
const freePort = async (taken: ReadonlySet<number>): Promise<number> => {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await bindable(0)
    if (port === undefined || port + 10000 > 65535 || taken.has(port)) continue
    if (await bindable(port + 10000) !== undefined) return port
  }
  throw new Error("no free port pair (P, P+10000) on 127.0.0.1 after 100 attempts")
}

interface Node {
  readonly port: number
  readonly process: ChildProcess
  /** The last lines the server printed, for an error message. */
  readonly output: () => string
  readonly exited: () => string | undefined
}

const startNode = (dir: string, port: number): Node => {
  const child = spawn("redis-server", [
    "--port",
    String(port),
    "--bind",
    HOST,
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    `nodes-${port}.conf`,
    "--cluster-node-timeout",
    "5000",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
    "--daemonize",
    "no"
  ], { stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  let exit: string | undefined
  const keep = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-4000))
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  child.on("error", (error) => void (exit = String(error)))
  child.on("exit", (code, signal) => void (exit = `exited (${signal ?? code})`))
  if (child.pid !== undefined) watchdog(child.pid, dir)
  return { port, process: child, output: () => output, exited: () => exit }
}

/**
 * A detached shell that outlives this process if it is killed (a signal runs no "exit" handler): once this
 * process is gone while the node still runs, it kills the node and removes the directory. It ends with the node.
 */
const watchdog = (node: number, dir: string) => {
  const script = `while kill -0 "$2" 2>/dev/null; do
  if ! kill -0 "$1" 2>/dev/null; then kill -9 "$2"; rm -rf "$3"; exit 0; fi
  sleep 0.5
done`
  spawn("sh", ["-c", script, "redis-cluster-watchdog", String(process.pid), String(node), dir], {
    detached: true,
    stdio: "ignore"
  }).unref()
}

/** Polls `condition` (a promise) until it holds: 30 s of real time at most, a hang fails. */
const until = (what: string, condition: () => Promise<boolean>) =>
  Effect.runPromise(
    eventually(Effect.promise(() => condition().catch(() => false)), { every: "25 millis", within: "30 seconds" })
      .pipe(Effect.mapError((e) => new Error(`${what}: ${e.message}`)))
  )

const plainClient = (port: number) => {
  // a command timeout: something else listening on the port (not Redis) must not hang a probe
  const client = new Redis(port, HOST, { maxRetriesPerRequest: 1, retryStrategy: () => 50, commandTimeout: 2000 })
  client.on("error", () => {})
  return client
}

const clusterClient = (ports: ReadonlyArray<number>, options: ClusterOptions = {}) => {
  const client = new Cluster(ports.map((port) => ({ host: HOST, port })), options)
  client.on("error", () => {})
  return client
}

/** Resolves once the client loaded the slots (its "ready"); fails after 30 s of real time, or if it ends. */
const ready = (client: Cluster): Promise<void> =>
  client.status === "ready" ? Promise.resolve() : new Promise((resolve, reject) => {
    // a real deadline: a client that never gets ready must fail the start (which then stops the nodes)

    const timer = setTimeout(() => reject(new Error(`the Cluster client was not ready within 30 s`)), 30_000)
    client.once("ready", () => {
      clearTimeout(timer)
      resolve()
    })
    client.once("end", () => {
      clearTimeout(timer)
      reject(new Error("the Cluster client ended before it was ready"))
    })
  })

/** The fields of `CLUSTER INFO`. */
const clusterInfo = async (client: Redis): Promise<Record<string, string>> => {
  const text = String(await client.call("CLUSTER", "INFO"))
  return Object.fromEntries(text.split(/\r?\n/).filter((l) => l.includes(":")).map((l) => l.split(":", 2)))
}

interface Running {
  readonly cluster: RedisCluster
  readonly stop: () => Promise<void>
}

/** Stops the nodes (SIGTERM, SIGKILL if one is still running after 3 s) and removes the directory. */
const stopAll = async (nodes: ReadonlyArray<Node>, dir: string) => {
  await Promise.all(nodes.map((node) =>
    node.exited() !== undefined ? undefined : new Promise<void>((resolve) => {
      // a real deadline for a process to exit on SIGTERM, then it is killed

      const kill = setTimeout(() => node.process.kill("SIGKILL"), 3000)
      node.process.once("exit", () => {
        clearTimeout(kill)
        resolve()
      })
      node.process.kill("SIGTERM")
    })
  ))
  rmSync(dir, { recursive: true, force: true })
}

/** Starts the cluster; everything it started is stopped again if a step fails. */
const start = async (): Promise<Running> => {
  const dir = mkdtempSync(join(tmpdir(), "effect-resilience-cluster-"))
  const nodes: Array<Node> = []
  const clients: Array<Redis | Cluster> = []
  // the test process may end without afterAll (a crash, a worker torn down): no server outlives it
  const onExit = () => nodes.forEach((n) => n.process.kill("SIGKILL"))
  process.once("exit", onExit)
  const stop = async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => undefined)))
    clients.forEach((c) => c.disconnect())
    await stopAll(nodes, dir)
    process.removeListener("exit", onExit)
  }
  try {
    const taken = new Set<number>()
    while (nodes.length < MASTERS) {
      if (taken.size >= MASTERS + 10) throw new Error(`could not start ${MASTERS} nodes on ${taken.size} ports`)
      const port = await freePort(taken)
      taken.add(port)
      const node = startNode(dir, port)
      const probe = plainClient(port)
      try {
        // answering PING, or exited (a port taken meanwhile: another one is chosen)
        await until(
          `redis-server on ${port} did not start`,
          async () => node.exited() !== undefined || await probe.ping() === "PONG"
        )
      } finally {
        probe.disconnect()
      }
      if (node.exited() === undefined) nodes.push(node)
      else if (!/in use/i.test(node.output())) {
        throw new Error(`redis-server on ${port} ${node.exited()}:\n${node.output()}`)
      }
    }
    const ports = nodes.map((n) => n.port)
    const create = spawnSync(
      "redis-cli",
      ["--cluster", "create", ...ports.map((p) => `${HOST}:${p}`), "--cluster-replicas", "0", "--cluster-yes"],
      { encoding: "utf8", timeout: 60_000 }
    )
    if (create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`)
    }
    const masters = ports.map(plainClient)
    clients.push(...masters)
    await until("the cluster did not reach cluster_state:ok on every node", async () => {
      const infos = await Promise.all(masters.map(clusterInfo))
      return infos.every((i) =>
        i.cluster_state === "ok" && Number(i.cluster_slots_ok) === SLOTS &&
        Number(i.cluster_known_nodes) === MASTERS
      )
    })
    const client = clusterClient(ports)
    clients.push(client)
    await ready(client)
    const connect = (options?: ClusterOptions) =>
      Effect.acquireRelease(
        Effect.promise(async () => {
          const c = clusterClient(ports, options)
          await ready(c)
          return c
        }),
        (c) =>
          Effect.promise(() => c.quit().catch(() => undefined)).pipe(Effect.ensuring(Effect.sync(() => c.disconnect())))
      )
    return { cluster: { ports, client, connect, masters }, stop }
  } catch (error) {
    const why = nodes.map((n) => `--- node ${n.port}:\n${n.output()}`).join("\n")
    await stop()
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${why}`)
  }
}

/**
 * Registers `body` with a cluster started once for it (before its first test) and stopped after its last.
 * Skipped locally without the binaries (with a note); in CI a missing binary fails the run.
 */
export const describeRedisCluster = (name: string, body: (cluster: ClusterRef) => void) => {
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
      running = await start()
      const millis = Math.round(performance.now() - started)
      console.log(`[redis cluster] 3 masters on ${running.cluster.ports.join(", ")}, ready in ${millis} ms`)
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
