/**
 * The pieces of the fleet breaker's multi-process tests on Effect 4: the root's Effect-free
 * test/support/fleetProcesses.ts (a dependency whose answers the test decides and which records every call;
 * replica processes of either edition, driven through stdin and read through their JSON lines on stdout) in
 * this edition's Effect, as the root's test/support/breakerFleet.ts does for Effect 3. The redis-server of the
 * test's own is ./redisServer.ts's.
 */
import { Effect } from "effect"
import {
  effect4Replica,
  type Launcher,
  type ReplicaProcess,
  startDependency,
  startReplica,
  type Stats
} from "../../../contract/support/fleetProcesses.js"
import { eventually } from "./eventually.js"
import { kill } from "./redisServer.js"

export type { Call, Dependency, Event, Mode, Stats } from "../../../contract/support/fleetProcesses.js"
export {
  effect3Replica,
  effect4Replica,
  inFallback,
  lastState,
  transitions
} from "../../../contract/support/fleetProcesses.js"

/** The dependency, stopped when the scope closes. */
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
 * Starts a replica (this edition's examples/fleet/replica.ts, or the root's with `launcher`) with `args` in this
 * `node` (Node 22); resolves at its `ready` line; SIGKILLed when the scope closes.
 */
export const replica = (id: string, args: ReadonlyArray<string>, launcher: Launcher = effect4Replica) =>
  Effect.acquireRelease(Effect.sync(() => startReplica(id, launcher, args)), (r) => kill(r.child)).pipe(
    Effect.tap((r) => Effect.tryPromise({ try: () => r.ready, catch: (error) => error as Error })),
    Effect.map(({ ready: _, send, statsAnswer, ...r }): Replica => ({
      ...r,
      send: (command) => Effect.sync(() => send(command)),
      stats: Effect.suspend(() => {
        const sid = String(++statsId)
        send(`stats ${sid}`)
        return Effect.andThen(
          eventually(Effect.sync(() => statsAnswer(sid) !== undefined), { every: "5 millis", within: "60 seconds" }),
          Effect.sync(() => statsAnswer(sid)!)
        )
      })
    }))
  )
