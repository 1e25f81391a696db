/**
 * A real Redis Cluster of the caller's own: `redis-server --cluster-enabled yes` processes on free 127.0.0.1
 * ports (each with its bus port, +10000, free too) in a temporary directory, joined by `redis-cli --cluster
 * create`, with 0 or more replicas per master. Ready once every node reports `cluster_state:ok` with all
 * 16384 slots and every node known, and every replica's link to its master is up. A node can be SIGKILLed
 * and started again (it rejoins with its `nodes.conf`: a master whose replica was promoted meanwhile comes
 * back as a replica of it). Nothing outlives the caller: the nodes are killed when this process exits, and a
 * detached watchdog kills them (and removes the directory) if this process is killed.
 *
 * Used by the failover fault (./redisFailover.ts) and, for the Cluster integration tests, by
 * test/support/redisCluster.ts. Plain promises; every wait is on a condition, with a generous cap.
 */
import { Cluster, type ClusterOptions, Redis } from "ioredis"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { until as holds } from "./support.js"

const HOST = "127.0.0.1"
export const SLOTS = 16384

export interface ClusterConfig {
  /** Masters (default 3). */
  readonly masters?: number
  /** Replicas per master (default 0). */
  readonly replicas?: number
  /**
   * `cluster-node-timeout` in milliseconds (default 5,000): how long a node may not answer before the others
   * count it as failing; a failover starts about then.
   */
  readonly nodeTimeoutMs?: number
  /** Caps every wait of the start (default 30 s). */
  readonly withinMs?: number
}

/** One line of `CLUSTER NODES`. */
export interface NodeView {
  readonly id: string
  readonly port: number
  readonly role: "master" | "replica"
  /** `fail` or `fail?` (pfail) among the node's flags, as the node asked sees it. */
  readonly failing: boolean
  /** For a replica: its master's id. */
  readonly masterId: string | undefined
  /** The slot ranges a master serves, `[first, last]`. */
  readonly slots: ReadonlyArray<readonly [number, number]>
}

export interface RunningCluster {
  /** Every node's client port, masters first as created. */
  readonly ports: ReadonlyArray<number>
  /** The ports of the masters as created (their roles may change after a failover). */
  readonly masterPorts: ReadonlyArray<number>
  /** A plain client of one node (closed by `stop`), e.g. for `CLUSTER INFO` or `SCRIPT FLUSH`. */
  readonly node: (port: number) => Redis
  /** A new Cluster client on every node's port; the caller closes it. */
  readonly connect: (options?: ClusterOptions) => Cluster
  /** `CLUSTER NODES` as one running node sees it (the first that answers, other than `except`). */
  readonly view: (except?: ReadonlyArray<number>) => Promise<ReadonlyArray<NodeView>>
  /** The port of the master serving `slot`, in the view of the nodes still running. */
  readonly masterOf: (slot: number) => Promise<number>
  /** Whether the node's process runs. */
  readonly running: (port: number) => boolean
  /** SIGKILLs a node (no shutdown, no last write) and resolves once its process is gone. */
  readonly kill: (port: number) => Promise<void>
  /** Sends a signal to a node's process: `SIGSTOP` stalls it (it reads nothing, answers nothing), `SIGCONT` resumes it. */
  readonly signal: (port: number, signal: "SIGSTOP" | "SIGCONT") => void
  /** Starts a killed node again on its port and directory; resolves once it answers PING. */
  readonly restart: (port: number) => Promise<void>
  /**
   * Resolves once every running node reports `cluster_state:ok` with all slots served by running masters,
   * and every running replica's link to its master is up.
   */
  readonly healthy: (what: string, withinMs?: number) => Promise<void>
  /** Stops every node (SIGTERM, SIGKILL after 3 s) and removes the directory. */
  readonly stop: () => Promise<void>
}

/**
 * Resolves once a Cluster client has loaded the slots (its "ready"); fails after `withinMs`, or if it ends. A
 * command without a key sent before that may go to a startup connection that ioredis then replaces, and fail
 * with "Connection is closed".
 */
export const ready = (client: Cluster, withinMs = 30_000): Promise<Cluster> =>
  client.status === "ready" ? Promise.resolve(client) : new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the Cluster client was not ready within ${withinMs} ms`)),
      withinMs
    )
    client.once("ready", () => {
      clearTimeout(timer)
      resolve(client)
    })
    client.once("end", () => {
      clearTimeout(timer)
      reject(new Error("the Cluster client ended before it was ready"))
    })
  })

/** Why the binaries cannot be used, or `undefined`. */
export const missingBinaries = (): string | undefined => {
  for (const binary of ["redis-server", "redis-cli"]) {
    const probe = spawnSync(binary, ["--version"], { encoding: "utf8" })
    if (probe.error !== undefined || probe.status !== 0) {
      return `${binary}: ${probe.error?.message ?? `exit ${probe.status}: ${probe.stderr}`}`
    }
  }
  return undefined
}

/** `until` of ./support.ts, with an error from the condition counting as "not yet" (a node still starting). */
const until = (what: string, condition: () => Promise<boolean> | boolean, withinMs = 30_000) =>
  holds(what, () => Promise.resolve().then(condition).catch(() => false), { withinMs, everyMs: 25 })

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
  process: ChildProcess
  /** The last lines the server printed, for an error message. */
  output: string
  exited: string | undefined
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

const spawnNode = (node: Node, dir: string, nodeTimeoutMs: number) => {
  const child = spawn("redis-server", [
    "--port",
    String(node.port),
    "--bind",
    HOST,
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    `nodes-${node.port}.conf`,
    "--cluster-node-timeout",
    String(nodeTimeoutMs),
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
    // a replica (re)joining syncs at once instead of waiting 5 s for others to share the transfer
    "--repl-diskless-sync-delay",
    "0",
    "--daemonize",
    "no"
  ], { stdio: ["ignore", "pipe", "pipe"] })
  node.process = child
  node.exited = undefined
  const keep = (chunk: Buffer) => void (node.output = (node.output + chunk.toString()).slice(-4000))
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  child.on("error", (error) => void (node.exited = String(error)))
  child.on("exit", (code, signal) => void (node.exited = `exited (${signal ?? code})`))
  if (child.pid !== undefined) watchdog(child.pid, dir)
}

const plainClient = (port: number) => {
  // a command timeout: something else listening on the port (not Redis) must not hang a probe
  const client = new Redis(port, HOST, { maxRetriesPerRequest: 1, retryStrategy: () => 50, commandTimeout: 2000 })
  client.on("error", () => {})
  return client
}

/** The fields of `CLUSTER INFO` or `INFO <section>`. */
const fields = (text: string): Record<string, string> =>
  Object.fromEntries(
    text.split(/\r?\n/).filter((l) => l.includes(":") && !l.startsWith("#")).map((l) => {
      const i = l.indexOf(":")
      return [l.slice(0, i), l.slice(i + 1)]
    })
  )

export const clusterInfo = async (client: Redis): Promise<Record<string, string>> =>
  fields(String(await client.call("CLUSTER", "INFO")))

export const replicationInfo = async (client: Redis): Promise<Record<string, string>> =>
  fields(await client.info("replication"))

const parseNodes = (text: string): Array<NodeView> =>
  text.trim().split("\n").map((line) => {
    const [id, address, flags, master, , , , , ...slots] = line.trim().split(" ")
    const port = Number(address!.split("@")[0]!.split(":")[1])
    const flagList = flags!.split(",")
    return {
      id: id!,
      port,
      role: flagList.includes("master") ? "master" : "replica",
      failing: flagList.includes("fail") || flagList.includes("fail?"),
      masterId: master === "-" ? undefined : master,
      slots: slots.filter((s) => !s.startsWith("[")).map((s) => {
        const [first, last] = s.split("-")
        return [Number(first), Number(last ?? first)] as const
      })
    }
  })

/** Stops the nodes (SIGTERM, SIGKILL if one still runs after 3 s). */
const stopNodes = (nodes: ReadonlyArray<Node>) =>
  Promise.all(nodes.map((node) =>
    node.exited !== undefined ? undefined : new Promise<void>((resolve) => {
      const kill = setTimeout(() => node.process.kill("SIGKILL"), 3000)
      node.process.once("exit", () => {
        clearTimeout(kill)
        resolve()
      })
      node.process.kill("SIGCONT") // a stalled node would not see SIGTERM
      node.process.kill("SIGTERM")
    })
  ))

/** Starts the cluster; everything it started is stopped again if a step fails. */
export const startCluster = async (config: ClusterConfig = {}): Promise<RunningCluster> => {
  const masters = config.masters ?? 3
  const replicas = config.replicas ?? 0
  const nodeTimeoutMs = config.nodeTimeoutMs ?? 5000
  const withinMs = config.withinMs ?? 30_000
  const total = masters * (1 + replicas)
  const dir = mkdtempSync(join(tmpdir(), "effect-resilience-cluster-"))
  const nodes: Array<Node> = []
  const clients = new Map<number, Redis>()
  // the process may end without stop (a crash, a test worker torn down): no server outlives it
  const onExit = () => nodes.forEach((n) => n.process.kill("SIGKILL"))
  process.once("exit", onExit)
  const client = (port: number) => {
    let c = clients.get(port)
    if (c === undefined) clients.set(port, c = plainClient(port))
    return c
  }
  const stop = async () => {
    await Promise.all([...clients.values()].map((c) => c.quit().catch(() => undefined)))
    clients.forEach((c) => c.disconnect())
    await stopNodes(nodes)
    rmSync(dir, { recursive: true, force: true })
    process.removeListener("exit", onExit)
  }
  const byPort = (port: number) => {
    const node = nodes.find((n) => n.port === port)
    if (node === undefined) throw new Error(`no node on port ${port}`)
    return node
  }
  const answers = async (node: Node) => {
    const probe = plainClient(node.port)
    try {
      // answering PING, or exited (a port taken meanwhile)
      await until(
        `redis-server on ${node.port} did not start`,
        async () => node.exited !== undefined || await probe.ping() === "PONG",
        withinMs
      )
    } finally {
      probe.disconnect()
    }
  }
  const running = (port: number) => byPort(port).exited === undefined
  const view = async (except: ReadonlyArray<number> = []) => {
    for (const node of nodes) {
      if (node.exited !== undefined || except.includes(node.port)) continue
      try {
        return parseNodes(String(await client(node.port).call("CLUSTER", "NODES")))
      } catch {
        // the next node
      }
    }
    throw new Error("no node of the cluster answers CLUSTER NODES")
  }
  /** Who serves which slots, as one node sees it: "<id> <ranges>" per master with slots, sorted. */
  const owners = (view: ReadonlyArray<NodeView>) =>
    view.filter((n) => n.role === "master" && n.slots.length > 0).map((n) => `${n.id} ${n.slots.join(",")}`).sort()
  const healthy = (what: string, within = withinMs) =>
    until(what, async () => {
      const up = nodes.filter((n) => n.exited === undefined)
      const infos = await Promise.all(up.map((n) => clusterInfo(client(n.port))))
      if (
        !infos.every((i) =>
          i.cluster_state === "ok" && Number(i.cluster_slots_ok) === SLOTS && Number(i.cluster_known_nodes) === total
        )
      ) return false
      // every running node sees the same masters, all running and none failing (a node started again
      // believes it is still the master it was until it hears of the promotion)
      const views = await Promise.all(
        up.map(async (n) => parseNodes(String(await client(n.port).call("CLUSTER", "NODES"))))
      )
      const upPorts = new Set(up.map((n) => n.port))
      const first = owners(views[0]!).join(";")
      for (const v of views) {
        const served = v.filter((n) => n.role === "master" && n.slots.length > 0)
        if (served.length !== masters || owners(v).join(";") !== first) return false
        if (!served.every((n) => upPorts.has(n.port))) return false
        // and every running node is seen running: a master whose replica was promoted has become a replica
        const seen = v.filter((n) => upPorts.has(n.port))
        if (seen.length !== up.length || seen.some((n) => n.failing)) return false
        if (seen.filter((n) => n.role === "replica").length !== up.length - masters) return false
      }
      const replicasUp = views[0]!.filter((n) => n.role === "replica" && upPorts.has(n.port))
      const links = await Promise.all(replicasUp.map((n) => replicationInfo(client(n.port))))
      return links.every((l) => l.role === "slave" && l.master_link_status === "up")
    }, within)
  try {
    const taken = new Set<number>()
    while (nodes.length < total) {
      if (taken.size >= total + 10) throw new Error(`could not start ${total} nodes on ${taken.size} ports`)
      const port = await freePort(taken)
      taken.add(port)
      const node: Node = { port, process: undefined as unknown as ChildProcess, output: "", exited: undefined }
      spawnNode(node, dir, nodeTimeoutMs)
      await answers(node)
      if (node.exited === undefined) nodes.push(node)
      else if (!/in use/i.test(node.output)) throw new Error(`redis-server on ${port} ${node.exited}:\n${node.output}`)
    }
    const ports = nodes.map((n) => n.port)
    // redis-cli makes the first `masters` nodes the masters and gives each of them `replicas` of the rest
    const create = spawnSync(
      "redis-cli",
      [
        "--cluster",
        "create",
        ...ports.map((p) => `${HOST}:${p}`),
        "--cluster-replicas",
        String(replicas),
        "--cluster-yes"
      ],
      { encoding: "utf8", timeout: 60_000 }
    )
    if (create.status !== 0) {
      throw new Error(`redis-cli --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`)
    }
    await healthy("the cluster did not reach cluster_state:ok with every replica in sync")
    const masterPorts = (await view()).filter((n) => n.role === "master").map((n) => n.port)
    return {
      ports,
      masterPorts: ports.filter((p) => masterPorts.includes(p)),
      node: client,
      connect: (options = {}) => {
        const c = new Cluster(ports.map((port) => ({ host: HOST, port })), options)
        c.on("error", () => {})
        return c
      },
      view,
      masterOf: async (slot) => {
        const owner = (await view()).find((n) =>
          n.role === "master" && !n.failing && n.slots.some(([a, b]) => slot >= a && slot <= b)
        )
        if (owner === undefined) throw new Error(`no master serves slot ${slot}`)
        return owner.port
      },
      running,
      kill: async (port) => {
        const node = byPort(port)
        if (node.exited !== undefined) return
        const gone = new Promise<void>((resolve) => node.process.once("exit", () => resolve()))
        node.process.kill("SIGKILL")
        await gone
        clients.get(port)?.disconnect()
        clients.delete(port)
      },
      signal: (port, signal) => {
        const node = byPort(port)
        if (node.exited === undefined) node.process.kill(signal)
      },
      restart: async (port) => {
        const node = byPort(port)
        if (node.exited === undefined) throw new Error(`node ${port} still runs`)
        spawnNode(node, dir, nodeTimeoutMs)
        await answers(node)
        if (node.exited !== undefined) throw new Error(`redis-server on ${port} ${node.exited}:\n${node.output}`)
      },
      healthy,
      stop
    }
  } catch (error) {
    const why = nodes.map((n) => `--- node ${n.port}:\n${n.output}`).join("\n")
    await stop()
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${why}`)
  }
}
