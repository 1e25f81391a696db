/**
 * The fleet breaker's contract, run by both editions against any Redis deployment: single node in
 * `CircuitBreaker.redis.int.test.ts`, a Redis Cluster in each edition's cluster tests. Every test builds two or three
 * "replicas" (breakers with the same name) in one process on `TestClock`: the flush fiber sleeps on it, the
 * script gets its time, and what travels through Redis (replies, pub/sub) is waited for with `eventually`.
 */
import { eventually, failureOption, fork, itRecording, pollFiber, TestClock, untilSleeping } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Schedule } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"

let counter = 0
/** A breaker name no other test (or run of the suite) uses. */
const fresh = (what: string) => `${what}-${process.pid}-${Date.now().toString(36)}-${++counter}`

const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")

export const isCircuitOpen = (exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isFailure(exit) &&
  failureOption(exit.cause).pipe((o) => o._tag === "Some" && o.value instanceof CircuitBreaker.CircuitOpen)

/** The `retryAfter` of an exit that is `CircuitOpen`, in milliseconds. */
const retryAfterOf = (exit: Exit.Exit<unknown, unknown>): number => {
  const e = Exit.isFailure(exit) ? failureOption(exit.cause) : undefined
  if (e?._tag !== "Some" || !(e.value instanceof CircuitBreaker.CircuitOpen)) throw new Error("expected CircuitOpen")
  return Duration.toMillis(e.value.retryAfter)
}

const stateIs = (breaker: CircuitBreaker.CircuitBreaker, state: CircuitBreaker.State) =>
  eventually(Effect.map(breaker.state, (s) => s === state), { within: "10 seconds" })

/** Runs `self` `n` times, whatever each ends with. */
const times = <A, E>(n: number, self: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* Effect.exit(self)
  })

const notFound = Effect.fail("not found")

/** The `lastFailure` of an exit that is `CircuitOpen`: `{}` when it has none. */
const lastFailureOf = (exit: Exit.Exit<unknown, unknown>): { readonly lastFailure?: unknown } => {
  const e = Exit.isFailure(exit) ? failureOption(exit.cause) : undefined
  if (e?._tag !== "Some" || !(e.value instanceof CircuitBreaker.CircuitOpen)) throw new Error("expected CircuitOpen")
  return "lastFailure" in e.value ? { lastFailure: e.value.lastFailure } : {}
}

/** A trial on `breaker` held until `end` says how it ends; returns once it runs (its permit granted). */
const heldTrial = (breaker: CircuitBreaker.CircuitBreaker) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<boolean>()
    let started = false
    const fiber = yield* fork(
      breaker.protect(
        Effect.andThen(
          Effect.sync(() => (started = true)),
          Effect.flatMap(Deferred.await(gate), (succeed) => succeed ? ok : Effect.fail("trial failed"))
        )
      )
    )
    yield* eventually(Effect.sync(() => started))
    // ends it and waits for its report's answer (the fiber ends after it)
    return { end: (succeed: boolean) => Effect.andThen(Deferred.succeed(gate, succeed), Fiber.await(fiber)) }
  })

/**
 * Moves TestClock by one flush interval, so each of the `n` replicas' flush fibers sends its counts, and
 * waits until every one has its answer (it then sleeps until the next interval).
 */
const flushAll = (n: number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust("100 millis")
    const t = yield* Clock.currentTimeMillis
    yield* untilSleeping(t + 100, n)
  })

export interface SuiteOptions {
  /** The connection each replica gets (a client may be shared: the breaker never closes one it was given). */
  readonly connection: () => CircuitBreakerRedis.Options["redis"]
  /** Key prefix of this run; must not contain braces. */
  readonly prefix: string
}

export const breakerRedisSuite = (label: string, suite: SuiteOptions) => {
  const replicas = (
    n: number,
    options: Omit<CircuitBreakerRedis.Options, "redis" | "name" | "prefix">,
    name = fresh("cb")
  ) =>
    Effect.gen(function*() {
      const all: Array<CircuitBreaker.CircuitBreaker> = []
      for (let i = 0; i < n; i++) {
        all.push(
          yield* CircuitBreakerRedis.make({
            ...options,
            name,
            prefix: suite.prefix,
            redis: suite.connection(),
            flushInterval: "100 millis",
            flushEvery: 100_000,
            timeout: "2 seconds"
          })
        )
      }
      return { all, name }
    })

  const rate = CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { duration: "10 seconds" } })

  /** Two replicas of a breaker that one failure opens for a first delay of 1 second: half-open when it returns. */
  const halfOpenPair = (options: Omit<CircuitBreakerRedis.Options, "redis" | "name" | "prefix" | "trip">) =>
    Effect.gen(function*() {
      const { all: [a, b] } = yield* replicas(2, { ...options, trip: CircuitBreaker.consecutive(1) })
      yield* Effect.exit(a!.protect(boom))
      yield* flushAll(2)
      yield* stateIs(b!, "open")
      yield* TestClock.adjust("1 second")
      yield* stateIs(b!, "half-open")
      return [a!, b!] as const
    })

  describe(`CircuitBreaker/Redis contract (${label})`, () => {
    itRecording(
      "the fleet's failure rate opens every replica, though no replica crossed it alone",
      () =>
        Effect.gen(function*() {
          const { all: [a, b, c] } = yield* replicas(3, { trip: rate, openFor: "10 seconds" })
          // 4 + 4 failures and 4 successes: 8 of 12 failed fleet-wide; each replica alone is under minimumCalls
          yield* times(4, a!.protect(boom))
          yield* times(4, b!.protect(boom))
          yield* times(4, c!.protect(ok))
          expect(yield* a!.state).toBe("closed")
          yield* flushAll(3)
          for (const r of [a!, b!, c!]) yield* stateIs(r, "open")
          for (const r of [a!, b!, c!]) {
            const exit = yield* Effect.exit(r.protect(ok))
            expect(isCircuitOpen(exit)).toBe(true)
          }
        })
    )

    itRecording("below the threshold fleet-wide, nobody opens", () =>
      Effect.gen(function*() {
        const { all: [a, b], name } = yield* replicas(2, { trip: rate, openFor: "10 seconds" })
        yield* times(4, a!.protect(boom))
        yield* times(8, b!.protect(ok))
        yield* flushAll(2)
        yield* flushAll(2)
        // a third replica's flush reads the fleet's state: still closed with 4 of 12 failed
        const { all: [c] } = yield* replicas(1, { trip: rate, openFor: "10 seconds" }, name)
        expect(yield* c!.state).toBe("closed")
        expect(yield* a!.state).toBe("closed")
        expect(yield* b!.state).toBe("closed")
      }))

    itRecording(
      "half-open: at most halfOpenPermits trials fleet-wide; their successes close every replica",
      () =>
        Effect.gen(function*() {
          const { all: [a, b, c] } = yield* replicas(3, {
            trip: CircuitBreaker.consecutive(2),
            openFor: "5 seconds",
            halfOpenPermits: 2
          })
          yield* times(2, a!.protect(boom))
          yield* flushAll(3)
          for (const r of [a!, b!, c!]) yield* stateIs(r, "open")
          yield* TestClock.adjust("5 seconds")
          for (const r of [a!, b!, c!]) yield* stateIs(r, "half-open")
          const gate = yield* Deferred.make<void>()
          let ran = 0
          const trialCall = Effect.andThen(Effect.sync(() => ran++), Effect.as(Deferred.await(gate), "ok"))
          // five callers on three replicas: two get a permit, three are refused
          const fibers = yield* Effect.forEach(
            [a!, b!, c!, a!, b!],
            (r) => fork(Effect.exit(r.protect(trialCall)))
          )
          yield* eventually(
            Effect.sync(() => fibers.filter((f) => pollFiber(f) !== undefined).length === 3)
          )
          expect(ran).toBe(2)
          yield* Deferred.succeed(gate, undefined)
          const exits = yield* Effect.forEach(fibers, Fiber.join)
          expect(exits.filter(Exit.isSuccess).length).toBe(2)
          expect(exits.filter(isCircuitOpen).length).toBe(3)
          for (const r of [a!, b!, c!]) yield* stateIs(r, "closed")
        })
    )

    itRecording("a failed trial reopens every replica, for the schedule's next delay", () =>
      Effect.gen(function*() {
        const [a, b] = yield* halfOpenPair({ openFor: Schedule.exponential("1 second") })
        const exit = yield* Effect.exit(b.protect(boom))
        expect(Exit.isFailure(exit) && !isCircuitOpen(exit)).toBe(true)
        yield* stateIs(a, "open")
        // the second opening lasts 2 seconds
        expect(retryAfterOf(yield* Effect.exit(a.protect(ok)))).toBe(2000)
        yield* TestClock.adjust("1 second")
        expect(yield* a.state).toBe("open")
        yield* TestClock.adjust("1 second")
        yield* stateIs(a, "half-open")
      }))

    itRecording(
      "a trial that hangs on one replica does not hold the fleet half-open: halfOpenTimeout reopens it for all",
      () =>
        Effect.gen(function*() {
          // default halfOpenTimeout: the openFor delay of the opening, 1 s then 2 s
          const [a, b] = yield* halfOpenPair({ openFor: Schedule.exponential("1 second") })
          const t = yield* Clock.currentTimeMillis
          const gate = yield* Deferred.make<void>()
          let started = false
          const hung = yield* fork(
            a.protect(Effect.andThen(Effect.sync(() => (started = true)), Effect.as(Deferred.await(gate), "late")))
          )
          yield* eventually(Effect.sync(() => started))
          // the only permit is taken: b's callers are told the time left in the period, never zero
          expect(retryAfterOf(yield* Effect.exit(b.protect(ok)))).toBe(1000)
          expect(retryAfterOf(yield* Effect.exit(b.protect(ok)))).toBe(1000)
          // the deadline lives in Redis: any replica's flush after it reopens the fleet, for the next delay
          yield* TestClock.adjust("1 second")
          for (const r of [a, b]) yield* stateIs(r, "open")
          const reopened = yield* Clock.currentTimeMillis
          expect(retryAfterOf(yield* Effect.exit(b.protect(ok)))).toBe(t + 1000 + 2000 - reopened)
          // the hung trial ends at last: its caller gets its result, and it decides nothing
          yield* Deferred.succeed(gate, undefined)
          expect(yield* Fiber.join(hung)).toBe("late")
          yield* flushAll(2)
          for (const r of [a, b]) expect(yield* r.state).toBe("open")
          // the next half-open period runs a fresh trial, whose success closes every replica
          yield* TestClock.adjust("2 seconds")
          yield* stateIs(b, "half-open")
          expect(yield* b.protect(ok)).toBe("ok")
          for (const r of [a, b]) yield* stateIs(r, "closed")
        })
    )

    itRecording(
      "halfOpenTimeout given: every replica's refusals count down the same period",
      () =>
        Effect.gen(function*() {
          const [a, b] = yield* halfOpenPair({ openFor: "1 second", halfOpenTimeout: "5 seconds" })
          const gate = yield* Deferred.make<void>()
          let started = false
          yield* fork(a.protect(Effect.andThen(Effect.sync(() => (started = true)), Deferred.await(gate))))
          yield* eventually(Effect.sync(() => started))
          expect(retryAfterOf(yield* Effect.exit(b.protect(ok)))).toBe(5000)
          yield* TestClock.adjust("3 seconds")
          expect(yield* b.state).toBe("half-open")
          expect(retryAfterOf(yield* Effect.exit(b.protect(ok)))).toBe(2000)
          expect(retryAfterOf(yield* Effect.exit(a.protect(ok)))).toBe(2000)
          yield* TestClock.adjust("2 seconds")
          for (const r of [a, b]) yield* stateIs(r, "open")
          yield* Deferred.succeed(gate, undefined)
        })
    )

    itRecording(
      "a sparse half-open period: a trial granted with none running starts the fleet's clock again",
      () =>
        Effect.gen(function*() {
          const [a, b] = yield* halfOpenPair({ openFor: "1 second", halfOpenPermits: 2, halfOpenTimeout: "1 second" })
          expect(yield* a.protect(ok)).toBe("ok")
          // the second trial comes long after the first one's deadline, on the other replica
          yield* TestClock.adjust("5 seconds")
          expect(yield* b.state).toBe("half-open")
          const gate = yield* Deferred.make<void>()
          let started = false
          const second = yield* fork(
            b.protect(Effect.andThen(Effect.sync(() => (started = true)), Effect.as(Deferred.await(gate), "ok")))
          )
          yield* eventually(Effect.sync(() => started))
          // the period's deadline is the full halfOpenTimeout from this trial, not the first one's, long gone
          expect(retryAfterOf(yield* Effect.exit(a.protect(ok)))).toBe(1000)
          yield* Deferred.succeed(gate, undefined)
          expect(yield* Fiber.join(second)).toBe("ok")
          for (const r of [a, b]) yield* stateIs(r, "closed")
        })
    )

    itRecording(
      "isIgnored fleet-wide: an ignored call is not counted; an ignored trial gives its permit back",
      () =>
        Effect.gen(function*() {
          const isIgnored = (e: unknown) => e === "not found"
          const { all: [a, b] } = yield* replicas(2, {
            trip: CircuitBreaker.consecutive(2),
            openFor: "1 second",
            isIgnored
          })
          yield* Effect.exit(a!.protect(boom))
          yield* Effect.exit(a!.protect(notFound))
          yield* flushAll(2)
          expect(yield* b!.state).toBe("closed")
          yield* Effect.exit(b!.protect(boom))
          yield* flushAll(2)
          yield* stateIs(a!, "open")
          yield* TestClock.adjust("1 second")
          yield* stateIs(a!, "half-open")
          // a's trial is ignored: the fleet's only permit is free again, and b's trial decides
          expect(yield* Effect.exit(a!.protect(notFound))).toEqual(Exit.fail("not found"))
          expect(yield* b!.state).toBe("half-open")
          expect(yield* b!.protect(ok)).toBe("ok")
          for (const r of [a!, b!]) yield* stateIs(r, "closed")
        })
    )

    itRecording(
      "halfOpenFailureRate fleet-wide: the sample is every replica's trials, counted in Redis",
      () =>
        Effect.gen(function*() {
          const [a, b] = yield* halfOpenPair({ openFor: "1 second", halfOpenPermits: 4, halfOpenFailureRate: 0.5 })
          const trials = yield* Effect.forEach([a, a, b, b], (r) => heldTrial(r))
          // every permit of the fleet is taken
          expect(isCircuitOpen(yield* Effect.exit(a.protect(ok)))).toBe(true)
          yield* trials[0]!.end(false)
          yield* trials[2]!.end(true)
          yield* trials[3]!.end(true)
          // a failed trial did not reopen it: three of four trials have reported
          for (const r of [a, b]) expect(yield* r.state).toBe("half-open")
          yield* trials[1]!.end(true)
          // 1 of 4 failed, below 0.5: closed for all
          for (const r of [a, b]) yield* stateIs(r, "closed")
        })
    )

    itRecording(
      "halfOpenFailureRate fleet-wide: 2 of 4 failed, on two replicas, opens every replica again",
      () =>
        Effect.gen(function*() {
          const [a, b] = yield* halfOpenPair({ openFor: "1 second", halfOpenPermits: 4, halfOpenFailureRate: 0.5 })
          const trials = yield* Effect.forEach([a, b, a, b], (r) => heldTrial(r))
          yield* trials[0]!.end(true)
          yield* trials[1]!.end(false)
          yield* flushAll(2)
          for (const r of [a, b]) expect(yield* r.state).toBe("half-open")
          yield* trials[2]!.end(true)
          yield* trials[3]!.end(false)
          for (const r of [a, b]) yield* stateIs(r, "open")
        })
    )

    itRecording(
      "lastFailure is what the replica knows: the one whose failures opened the fleet tells it, the other not",
      () =>
        Effect.gen(function*() {
          const { all: [a, b] } = yield* replicas(2, { trip: CircuitBreaker.consecutive(2), openFor: "1 second" })
          yield* Effect.exit(a!.protect(Effect.fail("first")))
          yield* Effect.exit(a!.protect(Effect.fail("second")))
          yield* flushAll(2)
          yield* stateIs(b!, "open")
          expect(lastFailureOf(yield* Effect.exit(a!.protect(ok)))).toEqual({ lastFailure: "second" })
          expect(lastFailureOf(yield* Effect.exit(b!.protect(ok)))).toEqual({})
          // still told in half-open, every permit taken; then b's failed trial opens it, and only b knows why
          yield* TestClock.adjust("1 second")
          yield* stateIs(a!, "half-open")
          const held = yield* heldTrial(b!)
          expect(lastFailureOf(yield* Effect.exit(a!.protect(ok)))).toEqual({ lastFailure: "second" })
          yield* held.end(false)
          for (const r of [a!, b!]) yield* stateIs(r, "open")
          expect(lastFailureOf(yield* Effect.exit(b!.protect(ok)))).toEqual({ lastFailure: "trial failed" })
          expect(lastFailureOf(yield* Effect.exit(a!.protect(ok)))).toEqual({})
          // isolated: no failure opened it
          yield* b!.isolate
          expect(lastFailureOf(yield* Effect.exit(b!.protect(ok)))).toEqual({})
        })
    )

    itRecording(
      "consecutive(n) fleet-wide: failures add up across replicas; a reported success restarts the run",
      () =>
        Effect.gen(function*() {
          const { all: [a, b] } = yield* replicas(2, { trip: CircuitBreaker.consecutive(4), openFor: "10 seconds" })
          yield* times(2, a!.protect(boom))
          yield* flushAll(2)
          // b: a success, then one failure: the fleet's run restarts at 1
          yield* Effect.exit(b!.protect(ok))
          yield* Effect.exit(b!.protect(boom))
          yield* flushAll(2)
          yield* times(2, a!.protect(boom))
          yield* flushAll(2)
          // 1 + 2 = 3 < 4: still closed
          expect(yield* a!.state).toBe("closed")
          expect(yield* b!.state).toBe("closed")
          yield* Effect.exit(b!.protect(boom))
          yield* flushAll(2)
          yield* stateIs(a!, "open")
          yield* stateIs(b!, "open")
        })
    )

    itRecording("a count window: the last `calls` calls fleet-wide", () =>
      Effect.gen(function*() {
        const trip = CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { calls: 20 } })
        const { all: [a, b] } = yield* replicas(2, { trip, openFor: "10 seconds" })
        yield* times(20, a!.protect(ok))
        yield* flushAll(2)
        yield* times(9, b!.protect(boom))
        yield* flushAll(2)
        // 9 of the last 20 failed
        expect(yield* a!.state).toBe("closed")
        yield* Effect.exit(b!.protect(boom))
        yield* flushAll(2)
        yield* stateIs(a!, "open")
      }))

    itRecording("isolate on one replica holds every replica open; reset closes them all", () =>
      Effect.gen(function*() {
        const { all: [a, b] } = yield* replicas(2, { trip: CircuitBreaker.consecutive(5), openFor: "1 second" })
        yield* a!.isolate
        yield* stateIs(b!, "open")
        yield* TestClock.adjust("1 minute")
        expect(yield* b!.state).toBe("open")
        const exit = yield* Effect.exit(b!.protect(ok))
        expect(isCircuitOpen(exit)).toBe(true)
        yield* b!.reset
        yield* stateIs(a!, "closed")
        expect(yield* a!.protect(ok)).toBe("ok")
      }))

    itRecording(
      "keyed: each key is a fleet breaker of its own, shared by every replica's registry of the name",
      () =>
        Effect.gen(function*() {
          const name = fresh("keyed")
          const registry = () =>
            CircuitBreakerRedis.keyed({
              trip: CircuitBreaker.consecutive(2),
              openFor: "10 seconds",
              name,
              prefix: suite.prefix,
              redis: suite.connection(),
              flushInterval: "100 millis",
              flushEvery: 100_000,
              timeout: "2 seconds"
            })
          const [r1, r2] = [yield* registry(), yield* registry()]
          // keys that look alike once joined, and keys with the characters keys are escaped for
          for (const key of ["https://a.example", "https://a.example:443", "{b}"]) {
            yield* Effect.exit(r1.protect(boom, key))
            yield* Effect.exit(boom.pipe(r1.protect(key)))
          }
          yield* Effect.exit(r2.protect(ok, "https://c.example"))
          yield* flushAll(4)
          for (const key of ["https://a.example", "https://a.example:443", "{b}"]) {
            yield* stateIs(yield* r2.get(key), "open")
            expect(isCircuitOpen(yield* Effect.exit(r2.protect(ok, key)))).toBe(true)
          }
          expect(yield* r2.protect(ok, "https://c.example")).toBe("ok")
          expect(yield* (yield* r1.get("https://c.example")).state).toBe("closed")
          expect(yield* r1.keys).toEqual(["https://a.example", "https://a.example:443", "{b}", "https://c.example"])
        })
    )

    itRecording(
      "a replica that starts while the fleet is open starts open, for the time left",
      () =>
        Effect.gen(function*() {
          const options = { trip: CircuitBreaker.consecutive(1), openFor: "10 seconds" } as const
          const { all: [a], name } = yield* replicas(1, options)
          yield* Effect.exit(a!.protect(boom))
          yield* flushAll(1)
          expect(yield* a!.state).toBe("open")
          yield* TestClock.adjust("4900 millis")
          const { all: [late] } = yield* replicas(1, options, name)
          expect(yield* late!.state).toBe("open")
          expect(yield* late!.snapshot).toMatchObject({ state: "open", openings: 1, openUntil: 100 + 10_000 })
          yield* TestClock.adjust("5100 millis")
          expect(yield* late!.state).toBe("half-open")
        })
    )
  })
}
