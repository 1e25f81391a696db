import { closedPort, eventually, fleetProcesses, ownReplica, redisServer } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"

// Three processes (the running edition's examples/fleet/replica.ts) share one fleet breaker on a redis-server of
// this test's own, which it kills and restarts; then one replica of each edition shares one breaker (a rolling
// upgrade). The dependency is an HTTP server in this process; the test decides its answers and records every
// call. Every wait is for a condition; the only time-based assertion is the staleness bound the docs state
// (docs/distributed-breaker.md): flushInterval + two round trips (the flush that opens the fleet, then the others'
// flush that its message prompts), where a round trip is capped by the breaker's `timeout` (a slower answer makes
// a replica leave the fleet). Condition waits are capped generously (60 s): a busy machine passes, a hang still
// fails.

const { effect3Replica, effect4Replica, inFallback, lastState, transitions } = fleetProcesses
type Dependency = fleetProcesses.Dependency

/** A redis-server of the test's own on `port`, and SIGKILL for it (or a replica). */
const startRedisServer = (port: number) => Effect.promise(() => redisServer.startRedisServer(port))
const kill = (child: Parameters<typeof redisServer.kill>[0]) => Effect.promise(() => redisServer.kill(child))

/** The dependency, stopped when the scope closes. */
const dependency = Effect.map(
  Effect.acquireRelease(Effect.promise(fleetProcesses.startDependency), ({ close }) => Effect.sync(close)),
  ({ dep }) => dep
)

interface Replica extends Omit<fleetProcesses.ReplicaProcess, "send" | "ready" | "statsAnswer"> {
  readonly send: (command: string) => Effect.Effect<void>
  /** The replica's outcome counts now. */
  readonly stats: Effect.Effect<fleetProcesses.Stats, Error>
}

let statsId = 0

/**
 * Starts a replica (this edition's, or another with `launcher`) with `args`; resolves at its `ready` line;
 * SIGKILLed when the scope closes.
 */
const replica = (id: string, args: ReadonlyArray<string>, launcher: fleetProcesses.Launcher = ownReplica) =>
  Effect.acquireRelease(Effect.sync(() => fleetProcesses.startReplica(id, launcher, args)), (r) => kill(r.child)).pipe(
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

const FLUSH_INTERVAL = 100
const TIMEOUT = 1000
const PERMITS = 2
const OPEN_FOR = 1500
// longer than the half-open phase below can take on a busy machine: its held trials must not time out (the
// default, OPEN_FOR, would reopen the fleet and let another round of trials through)
const HALF_OPEN_TIMEOUT = 60_000
const MINIMUM_CALLS = 20

const all = (replicas: ReadonlyArray<Replica>, p: (r: Replica) => boolean) =>
  eventually(Effect.sync(() => replicas.every(p)), { within: "60 seconds" })

const toEach = (replicas: ReadonlyArray<Replica>, command: string) => Effect.forEach(replicas, (r) => r.send(command))

/** Stops the replicas' load and waits until none of them has a call running. */
const loadOff = (replicas: ReadonlyArray<Replica>) =>
  Effect.gen(function*() {
    const seen = replicas.map((r) => r.events.length)
    yield* toEach(replicas, "load off")
    yield* all(replicas, (r) =>
      r.events.slice(seen[replicas.indexOf(r)]).some((e) => e.event === "load" && e.on === false))
  })

/** The time of the first transition to `to` at or after `since`. */
const firstTo = (r: Replica, to: string, since: number) => transitions(r).find((t) => t.to === to && t.at >= since)

/**
 * Waits until `halfOpenPermits` calls are held by the dependency and every replica was refused 20 more times
 * since it began waiting (CircuitOpen while half-open): long enough for another trial to show, had the fleet let one
 * through.
 */
const untilTrialsHeld = (replicas: ReadonlyArray<Replica>, dep: Dependency) =>
  Effect.gen(function*() {
    const before = yield* Effect.forEach(replicas, (r) => r.stats)
    yield* eventually(
      Effect.map(
        Effect.forEach(replicas, (r) => r.stats),
        (now) => now.every((s, i) => s.halfOpen - before[i]!.halfOpen >= 20) && dep.held.length >= PERMITS
      ),
      { within: "60 seconds" }
    )
  })

/** Every replica's command line: breaker `name` on the redis-server at `port`, calling `dependencyUrl`. */
const replicaArgs = (port: number, name: string, dependencyUrl: string) => [
  "--redis",
  `redis://127.0.0.1:${port}`,
  "--name",
  name,
  "--dependency",
  dependencyUrl,
  "--flush-interval",
  String(FLUSH_INTERVAL),
  "--timeout",
  String(TIMEOUT),
  "--permits",
  String(PERMITS),
  "--open-for",
  String(OPEN_FOR),
  "--half-open-timeout",
  String(HALF_OPEN_TIMEOUT),
  "--minimum-calls",
  String(MINIMUM_CALLS)
]

describe("three processes share one breaker on Redis", () => {
  it.live(
    "they open together, run halfOpenPermits trials between them, survive Redis dying and share again when it is back",
    () =>
      Effect.gen(function*() {
        const port = yield* Effect.promise(closedPort)
        let server = yield* startRedisServer(port)
        yield* Effect.addFinalizer(() => kill(server))
        const dep = yield* dependency
        const name = `fleet-${process.pid}-${Date.now().toString(36)}`
        const args = replicaArgs(port, name, dep.url)
        const replicas = yield* Effect.all(
          ["r1", "r2", "r3"].map((id) => replica(id, args)),
          { concurrency: 3 }
        )
        const figures: Record<string, unknown> = {}

        // 1. the dependency fails: the fleet crosses its threshold, and every replica opens within
        //    one flush interval + two round trips
        dep.mode = "fail"
        const failStart = dep.calls.length
        yield* toEach(replicas, "load on")
        yield* all(replicas, (r) => lastState(r) === "open")
        const failures = dep.calls.slice(failStart)
        const crossedAt = failures[MINIMUM_CALLS - 1]!.at
        const lags = replicas.map((r) => firstTo(r, "open", 0)!.at - crossedAt)
        // calls the dependency served to each replica after the first replica opened
        const fleetOpenedAt = Math.min(...replicas.map((r) => firstTo(r, "open", 0)!.at))
        const lateCalls = replicas.map((r) => failures.filter((c) => c.replica === r.id && c.at > fleetOpenedAt).length)
        figures.openLagMillis = lags
        figures.callsAfterFleetOpened = lateCalls
        figures.failuresServedBeforeAllOpen = failures.length
        for (const lag of lags) expect(lag).toBeLessThanOrEqual(FLUSH_INTERVAL + 2 * TIMEOUT)

        // 2. half-open: the dependency holds every call; exactly `halfOpenPermits` trials reach it across the
        //    three, while every replica keeps being refused
        // (calls admitted before the replicas opened may still be on their way: let them land first)
        yield* loadOff(replicas)
        dep.mode = "hold"
        const holdStart = dep.calls.length
        yield* toEach(replicas, "load on")
        yield* all(replicas, (r) => firstTo(r, "half-open", fleetOpenedAt) !== undefined)
        yield* untilTrialsHeld(replicas, dep)
        const trials = dep.calls.slice(holdStart)
        figures.trialsAcrossFleet = trials.length
        figures.trialsByReplica = replicas.map((r) => trials.filter((c) => c.replica === r.id).length)
        expect(trials.length).toBe(PERMITS)
        expect(dep.held.length).toBe(PERMITS)
        // their success closes the breaker everywhere
        dep.mode = "ok"
        dep.release()
        const releasedAt = Date.now()
        yield* all(replicas, (r) => firstTo(r, "closed", releasedAt - 1000) !== undefined && lastState(r) === "closed")

        // 3. Redis killed: every replica falls back to its local breaker; calls keep flowing; the local
        //    breakers still trip on their own
        yield* kill(server)
        yield* all(replicas, inFallback)
        const okBefore = yield* Effect.forEach(replicas, (r) => r.stats)
        yield* eventually(
          Effect.map(Effect.forEach(replicas, (r) => r.stats), (now) =>
            now.every((s, i) => s.ok - okBefore[i]!.ok >= 50)),
          { within: "60 seconds" }
        )
        dep.mode = "fail"
        const localFailAt = Date.now()
        yield* all(replicas, (r) =>
          firstTo(r, "open", localFailAt) !== undefined)
        dep.mode = "ok"
        yield* all(replicas, (r) => lastState(r) === "closed")

        // 4. Redis back: every replica rejoins; failures on one replica alone open all three again
        server = yield* startRedisServer(port)
        yield* all(replicas, (r) => !inFallback(r))
        const [r1, r2, r3] = replicas
        yield* loadOff([r2!, r3!])
        dep.mode = "fail"
        const sharedFailAt = Date.now()
        yield* all(replicas, (r) => firstTo(r, "open", sharedFailAt) !== undefined)
        const strays = dep.calls.filter((c) => c.at >= sharedFailAt && c.replica !== r1!.id)
        if (strays.length > 0) {
          console.log(JSON.stringify({ strays, sharedFailAt, r2: r2!.events.slice(-8), r3: r3!.events.slice(-8) }))
        }
        expect(strays.length).toBe(0)

        // the breaker itself never failed a call
        const final = yield* Effect.forEach(replicas, (r) => r.stats)
        figures.outcomes = final.map(({ otherSample: _, ...s }) => s)
        for (const s of final) expect(s.other, s.otherSample).toBe(0)
        console.log(`fleet breaker figures: ${JSON.stringify(figures)}`)
      }).pipe(Effect.scoped),
    300_000
  )
})

// The fleet protocol is the core's (packages/core/src/breakerFleetScript.ts and the replies it decodes), which both
// editions run: replicas of either edition that share a name share one breaker. (Both replicas are processes: the
// edition that runs this file only drives them. The Effect 4 replica needs Node 22: see fleetProcesses.ts.)
describe("an Effect 3 replica and an Effect 4 replica share one breaker on Redis", () => {
  it.live(
    "either's failures open both, they share halfOpenPermits trials, and isolate and reset on one reach the other",
    () =>
      Effect.gen(function*() {
        const port = yield* Effect.promise(closedPort)
        const server = yield* startRedisServer(port)
        yield* Effect.addFinalizer(() => kill(server))
        const dep = yield* dependency
        const args = replicaArgs(port, `cross-${process.pid}-${Date.now().toString(36)}`, dep.url)
        const [e3, e4] = yield* Effect.all([replica("e3", args, effect3Replica), replica("e4", args, effect4Replica)], {
          concurrency: 2
        })
        const both = [e3!, e4!]

        // 1. the Effect 3 replica's failures alone open the Effect 4 replica, which made no call
        dep.mode = "fail"
        yield* e3!.send("load on")
        yield* all(both, (r) => lastState(r) === "open")
        expect(dep.calls.filter((c) => c.replica !== e3!.id)).toEqual([])
        const openedAt = Math.min(...both.map((r) => firstTo(r, "open", 0)!.at))

        // 2. half-open: the dependency holds every call; `halfOpenPermits` trials between the two editions
        yield* loadOff([e3!])
        dep.mode = "hold"
        const holdStart = dep.calls.length
        yield* toEach(both, "load on")
        yield* all(both, (r) => firstTo(r, "half-open", openedAt) !== undefined)
        yield* untilTrialsHeld(both, dep)
        expect(dep.calls.length - holdStart).toBe(PERMITS)
        dep.mode = "ok"
        dep.release()
        const releasedAt = Date.now()
        yield* all(both, (r) => firstTo(r, "closed", releasedAt - 1000) !== undefined && lastState(r) === "closed")

        // 3. the Effect 4 replica's failures alone open the Effect 3 replica
        yield* loadOff([e3!])
        dep.mode = "fail"
        const e4FailAt = Date.now()
        yield* all(both, (r) => firstTo(r, "open", e4FailAt) !== undefined)
        expect(dep.calls.filter((c) => c.at >= e4FailAt && c.replica !== e4!.id)).toEqual([])
        // (its trials succeed once the dependency does: both close again)
        dep.mode = "ok"
        yield* all(both, (r) => lastState(r) === "closed")

        // 4. isolate on the Effect 3 replica opens the Effect 4 one; reset on the Effect 4 replica closes both
        yield* loadOff([e4!])
        const isolatedAt = Date.now()
        yield* e3!.send("isolate")
        yield* all(both, (r) => firstTo(r, "open", isolatedAt) !== undefined)
        const resetAt = Date.now()
        yield* e4!.send("reset")
        yield* all(both, (r) => firstTo(r, "closed", resetAt) !== undefined)

        // neither breaker failed a call itself
        for (const s of yield* Effect.forEach(both, (r) => r.stats)) expect(s.other, s.otherSample).toBe(0)
      }).pipe(Effect.scoped),
    300_000
  )
})
