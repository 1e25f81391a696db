/**
 * The pieces of the three-process fleet breaker test (the Effect 3 edition's test/support/breakerFleet.ts, on
 * Effect 4): a dependency (an HTTP server in the test process whose answers the test decides, and which records
 * every call), and replica processes (examples/fleet/replica.ts) driven through stdin and read through their
 * JSON lines on stdout. The redis-server of the test's own is ./redisServer.ts's.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { fileURLToPath } from "node:url"
import { eventually } from "./eventually.js"
import { kill } from "./redisServer.js"

const pkg = fileURLToPath(new URL("../..", import.meta.url))

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

export const dependency = Effect.acquireRelease(
  Effect.callback<{ dep: Dependency; close: () => void }>((resume) => {
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
      resume(Effect.succeed({
        dep,
        close: () => {
          dep.release()
          server.closeAllConnections()
          server.close()
        }
      }))
    })
  }),
  ({ close }) => Effect.sync(close)
).pipe(Effect.map(({ dep }) => dep))

export interface Event {
  readonly event: string
  readonly [key: string]: unknown
}

export interface Replica {
  readonly id: string
  readonly child: ChildProcess
  /** Every event the replica printed, in order. */
  readonly events: Array<Event>
  readonly send: (command: string) => Effect.Effect<void>
  /** The replica's outcome counts now. */
  readonly stats: Effect.Effect<Stats, Error>
  readonly output: () => string
}

export interface Stats {
  readonly ok: number
  readonly failed: number
  readonly open: number
  readonly halfOpen: number
  readonly other: number
  readonly otherSample: string
}

let statsId = 0

/**
 * Starts examples/fleet/replica.ts with `args` in a plain `node` (this one: Node 22, which strips the types;
 * ./tsResolve.mjs finds the sources); resolves at its `ready` line; SIGKILLed when the scope closes.
 */
export const replica = (id: string, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.callback<Replica, Error>((resume) => {
      const child = spawn(process.execPath, [
        "--no-warnings",
        "--experimental-transform-types",
        "--import",
        "./test/support/tsResolve.mjs",
        "examples/fleet/replica.ts",
        "--id",
        id,
        ...args
      ], { cwd: pkg, stdio: ["pipe", "pipe", "pipe"] })
      const events: Array<Event> = []
      let output = ""
      let buffer = ""
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
          if (event.event === "ready") resume(Effect.succeed(self))
        }
      })
      child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.on("exit", (code) => resume(Effect.fail(new Error(`replica ${id} exited (${code}):\n${output}`))))
      const send = (command: string) => Effect.sync(() => void child.stdin!.write(`${command}\n`))
      const self: Replica = {
        id,
        child,
        events,
        send,
        output: () => output,
        stats: Effect.suspend(() => {
          const sid = String(++statsId)
          const answer = () => events.find((e) => e.event === "stats" && e.id === sid) as Stats | undefined
          return Effect.andThen(
            send(`stats ${sid}`),
            Effect.andThen(
              eventually(Effect.sync(() => answer() !== undefined), { every: "5 millis", within: "60 seconds" }),
              Effect.sync(() => answer()!)
            )
          )
        })
      }
      return Effect.sync(() => child.kill("SIGKILL"))
    }),
    (r) => kill(r.child)
  )

/** The replica's transitions, in order. */
export const transitions = (r: Replica) =>
  r.events.filter((e) => e.event === "transition") as unknown as ReadonlyArray<{ from: string; to: string; at: number }>

/** The last state the replica reported (closed before its first transition). */
export const lastState = (r: Replica): string => {
  const ts = transitions(r)
  return ts.length === 0 ? "closed" : ts[ts.length - 1]!.to
}

/** Whether the replica currently runs on its local breaker (its last `fallback` event). */
export const inFallback = (r: Replica): boolean => {
  const fs = r.events.filter((e) => e.event === "fallback")
  return fs.length > 0 && fs[fs.length - 1]!.on === true
}
