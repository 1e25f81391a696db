/**
 * The Effect-free pieces of the fleet breaker's multi-process tests, shared by both editions (the contract suite
 * suites/CircuitBreaker.redis.fleet.int.test.ts wraps them in the running edition's Effect): a dependency
 * (an HTTP server in the test process whose answers the test decides, and which records every call), and
 * replica processes — either edition's examples/fleet/replica.ts, the same commands and events — driven through
 * stdin and read through their JSON lines on stdout.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../..", import.meta.url))

export type Mode = "ok" | "fail" | "hold"

export interface Call {
  readonly replica: string
  /** When the dependency answered (or, for a held call, received it): `Date.now()`. */
  readonly at: number
  readonly mode: Mode
}

/**
 * The dependency: `ok` answers 200, `fail` 500, `hold` keeps the request until {@link Dependency.release}
 * answers 200 to all held ones.
 */
export interface Dependency {
  readonly url: string
  mode: Mode
  readonly calls: Array<Call>
  readonly held: Array<ServerResponse>
  readonly release: () => void
}

/** Starts the dependency on a free port of 127.0.0.1; `close` answers the held calls and stops it. */
export const startDependency = (): Promise<{ readonly dep: Dependency; readonly close: () => void }> =>
  new Promise((resolve) => {
    const dep: Dependency = {
      url: "",
      mode: "ok",
      calls: [],
      held: [],
      release: () => {
        for (const res of dep.held.splice(0)) res.writeHead(200).end("ok")
      }
    }
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const replica = new URL(req.url ?? "/", "http://x").searchParams.get("replica") ?? "?"
      const mode = dep.mode
      dep.calls.push({ replica, at: Date.now(), mode })
      if (mode === "hold") dep.held.push(res)
      else res.writeHead(mode === "ok" ? 200 : 500).end(mode)
    })
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      ;(dep as { url: string }).url = `http://127.0.0.1:${port}/call`
      resolve({
        dep,
        close: () => {
          dep.release()
          server.closeAllConnections()
          server.close()
        }
      })
    })
  })

/** How a replica process starts: `node <argv> --id <id> <args>` in `cwd`, with `node()` (default: this one). */
export interface Launcher {
  readonly cwd: string
  readonly argv: ReadonlyArray<string>
  readonly node?: () => string
}

const newEnough = (version: string) => {
  const [major = 0, minor = 0] = version.replace(/^v/, "").split(".").map(Number)
  return major > 22 || (major === 22 && minor >= 18)
}

/**
 * A `node` that runs the Effect 4 edition's replica (22.18 or newer): this one, else the repository's
 * `.tools/` (where .ci/package.sh installs Node 22 for the Effect 4 edition), so that the Effect 3 edition's tests,
 * on Node 20, can start one too.
 */
const node22 = (): string => {
  if (newEnough(process.versions.node)) return process.execPath
  const tools = `${root}.tools/node_modules/.bin/node`
  if (existsSync(tools) && newEnough(spawnSync(tools, ["--version"], { encoding: "utf8" }).stdout.trim())) return tools
  throw new Error(
    `the Effect 4 edition's replica needs Node 22.18 or newer: this is Node ${process.versions.node}, and ` +
      `${tools} is missing or older (bash .ci/package.sh effect4 install puts Node 22 there)`
  )
}

/** The Effect 3 edition's replica (packages/effect3/examples/fleet/replica.ts through tsx). */
export const effect3Replica: Launcher = {
  cwd: `${root}packages/effect3`,
  argv: ["--import", "tsx", "examples/fleet/replica.ts"]
}

/**
 * The Effect 4 edition's replica (packages/effect4/examples/fleet/replica.ts): Node 22 strips its types and its
 * scripts/tsResolve.mjs finds the sources (`effect-resilience/…` is that package's src/), on Node 22.18 or newer
 * (this process's, or the repository's .tools/).
 */
export const effect4Replica: Launcher = {
  cwd: `${root}packages/effect4`,
  node: node22,
  argv: [
    "--no-warnings",
    "--experimental-transform-types",
    "--import",
    "./scripts/tsResolve.mjs",
    "examples/fleet/replica.ts"
  ]
}

export interface Event {
  readonly event: string
  readonly [key: string]: unknown
}

export interface Stats {
  readonly ok: number
  readonly failed: number
  readonly open: number
  readonly halfOpen: number
  readonly other: number
  readonly otherSample: string
}

export interface ReplicaProcess {
  readonly id: string
  readonly child: ChildProcess
  /** Every event the replica printed, in order. */
  readonly events: Array<Event>
  /** Resolves at its `ready` line; rejects when it exits first. */
  readonly ready: Promise<void>
  readonly send: (command: string) => void
  /** The answer to `stats <sid>`, once the replica printed it. */
  readonly statsAnswer: (sid: string) => Stats | undefined
  readonly output: () => string
}

/** Starts a replica with `args`, as `launcher` says. */
export const startReplica = (id: string, launcher: Launcher, args: ReadonlyArray<string>): ReplicaProcess => {
  const child = spawn(launcher.node?.() ?? process.execPath, [...launcher.argv, "--id", id, ...args], {
    cwd: launcher.cwd,
    stdio: ["pipe", "pipe", "pipe"]
  })
  const events: Array<Event> = []
  let output = ""
  let buffer = ""
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      buffer += chunk.toString()
      let nl: number
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        if (!line.startsWith("{")) continue
        const event = JSON.parse(line) as Event
        events.push(event)
        if (event.event === "ready") resolve()
      }
    })
    child.on("exit", (code) => reject(new Error(`replica ${id} exited (${code}):\n${output}`)))
  })
  ready.catch(() => {}) // a caller that no longer waits for it must not see an unhandled rejection
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  return {
    id,
    child,
    events,
    ready,
    send: (command) => void child.stdin!.write(`${command}\n`),
    statsAnswer: (sid) => events.find((e) => e.event === "stats" && e.id === sid) as unknown as Stats | undefined,
    output: () => output
  }
}

interface HasEvents {
  readonly events: ReadonlyArray<Event>
}

/** The replica's transitions, in order. */
export const transitions = (r: HasEvents) =>
  r.events.filter((e) => e.event === "transition") as unknown as ReadonlyArray<{ from: string; to: string; at: number }>

/** The last state the replica reported (closed before its first transition). */
export const lastState = (r: HasEvents): string => {
  const ts = transitions(r)
  return ts.length === 0 ? "closed" : ts[ts.length - 1]!.to
}

/** Whether the replica currently runs on its local breaker (its last `fallback` event). */
export const inFallback = (r: HasEvents): boolean => {
  const fs = r.events.filter((e) => e.event === "fallback")
  return fs.length > 0 && fs[fs.length - 1]!.on === true
}
