import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  dependency,
  inFallback,
  kill,
  lastState,
  type Replica,
  replica,
  startRedisServer,
  transitions
} from "./support/breakerFleet.js"
import { eventually } from "./support/eventually.js"
import { closedPort } from "./support/redis.js"

// Three processes (examples/fleet/replica.ts) share one fleet breaker on a redis-server of this test's own,
// which it kills and restarts. The dependency is an HTTP server in this process; the test decides its answers
// and records every call. Every wait is for a condition; the only time-based assertion is the staleness
// bound the docs state (docs/distributed-breaker.md): flushInterval + two round trips (the flush that opens
// the fleet, then the others' flush that its message prompts), where a round trip is capped by the breaker's
// `timeout` (a slower answer makes a replica leave the fleet).

const FLUSH_INTERVAL = 100
const TIMEOUT = 1000
const PERMITS = 2
const OPEN_FOR = 1500
// longer than the half-open phase below can take on a busy machine: its held trials must not time out (the
// default, OPEN_FOR, would reopen the fleet and let another round of trials through)
const HALF_OPEN_TIMEOUT = 60_000
const MINIMUM_CALLS = 20

const all = (replicas: ReadonlyArray<Replica>, p: (r: Replica) => boolean) =>
  eventually(Effect.sync(() => replicas.every(p)), { within: "30 seconds" })

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
        const args = [
          "--redis",
          `redis://127.0.0.1:${port}`,
          "--name",
          name,
          "--dependency",
          dep.url,
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
        const before = yield* Effect.forEach(replicas, (r) => r.stats)
        yield* eventually(
          Effect.map(
            Effect.forEach(replicas, (r) => r.stats),
            (now) => now.every((s, i) => s.halfOpen - before[i]!.halfOpen >= 20) && dep.held.length >= PERMITS
          ),
          { within: "30 seconds" }
        )
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
          { within: "30 seconds" }
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
    120_000
  )
})
