/**
 * The pieces of the three-process fleet breaker test: a redis-server of the test's own (on a free port, so it
 * can be killed and restarted), and, in this edition's Effect, ./fleetProcesses.ts's dependency (an HTTP server
 * in the test process whose answers the test decides, and which records every call) and replica processes
 * (examples/fleet/replica.ts) driven through stdin and read through their JSON lines on stdout.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  effect3Replica,
  type Launcher,
  type ReplicaProcess,
  startDependency,
  startReplica,
  type Stats
} from "../../../contract/support/fleetProcesses.js"
import { eventually } from "./eventually.js"

export const REDIS_SERVER = process.env.REDIS_SERVER ?? "/usr/bin/redis-server"

const exited = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

/**
 * Starts redis-server on `port`; resolves once it accepts connections. No automatic persistence; it runs in a
 * temporary directory of its own, removed when it exits, unless `dir` is given: then it loads the `dump.rdb`
 * an earlier server left there by `SAVE` (the caller owns the directory).
 */
export const startRedisServer = (port: number, options: { readonly dir?: string } = {}) =>
  Effect.async<ChildProcess, Error>((resume) => {
    const owned = options.dir === undefined
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), "fleet-redis-"))
    const child = spawn(REDIS_SERVER, [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir
    ], { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("Ready to accept connections")) resume(Effect.succeed(child))
    })
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("error", (error) => resume(Effect.fail(error)))
    child.on("exit", (code) => {
      if (owned) rmSync(dir, { recursive: true, force: true })
      resume(Effect.fail(new Error(`redis-server exited (${code}) before it was ready:\n${output}`)))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** SIGKILLs a process and waits for its exit. */
export const kill = (child: ChildProcess) =>
  Effect.suspend(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    return exited(child)
  })

export type { Call, Dependency, Event, Mode, Stats } from "../../../contract/support/fleetProcesses.js"
export { inFallback, lastState, transitions } from "../../../contract/support/fleetProcesses.js"

/** The dependency (./fleetProcesses.ts), stopped when the scope closes. */
export const dependency = Effect.acquireRelease(Effect.promise(startDependency), ({ close }) => Effect.sync(close))
  .pipe(
    Effect.map(({ dep }) => dep)
  )

export interface Replica extends Omit<ReplicaProcess, "send" | "ready" | "statsAnswer"> {
  readonly send: (command: string) => Effect.Effect<void>
  /** The replica's outcome counts now. */
  readonly stats: Effect.Effect<Stats, Error>
}

let statsId = 0

/**
 * Starts a replica (examples/fleet/replica.ts, or the Effect 4 edition's with `launcher`) with `args`; resolves at
 * its `ready` line; SIGKILLed when the scope closes.
 */
export const replica = (id: string, args: ReadonlyArray<string>, launcher: Launcher = effect3Replica) =>
  Effect.acquireRelease(Effect.sync(() => startReplica(id, launcher, args)), (r) => kill(r.child)).pipe(
    Effect.tap((r) => Effect.tryPromise({ try: () => r.ready, catch: (error) => error as Error })),
    Effect.map(({ ready: _, send, statsAnswer, ...r }): Replica => ({
      ...r,
      send: (command) => Effect.sync(() => send(command)),
      stats: Effect.suspend(() => {
        const sid = String(++statsId)
        send(`stats ${sid}`)
        return Effect.flatMap(
          eventually(Effect.sync(() => statsAnswer(sid) !== undefined), { every: "5 millis" }),
          () => Effect.sync(() => statsAnswer(sid)!)
        )
      })
    }))
  )
