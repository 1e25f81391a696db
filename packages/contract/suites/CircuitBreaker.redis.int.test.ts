import {
  blackHole,
  captureLogs,
  channelOf,
  closedPort,
  counterValue,
  deleteKeys,
  describeRedis,
  type DurationInput,
  eventually,
  failureOption,
  fork,
  gaugeValue,
  hashTag,
  itRecording,
  keysOf,
  REDIS_URL,
  redisServer,
  resolveFleet,
  scoped,
  ServiceKey,
  tapSchedule,
  TestClock,
  uniquePrefix,
  untilSleeping
} from "#edition"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Schedule, Scope } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
import { Redis } from "ioredis"
import { breakerRedisSuite, isCircuitOpen } from "./breakerRedisSuite.js"

const prefix = uniquePrefix("cb")
const shared = new Redis(REDIS_URL, { lazyConnect: true })
shared.on("error", () => {})

let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${++counter}`

/** A breaker named `name` on the shared client, under this file's prefix. */
const onShared = (
  name: string,
  trip: CircuitBreaker.TripPolicy,
  openFor: DurationInput = "1 second"
): CircuitBreakerRedis.Options => ({ trip, openFor, name, prefix, redis: { client: shared } })

const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")

/** Runs `self` in `scope`, which outlives it (Effect 3: `Scope.extend`; Effect 4: `Scope.provide`). */
const inScope = (scope: Scope.Scope) => <A, E>(self: Effect.Effect<A, E, Scope.Scope>): Effect.Effect<A, E> =>
  Effect.provideService(self, Scope.Scope, scope)

describeRedis("CircuitBreaker/Redis", () => {
  afterAll(async () => {
    // the breaker never closes a client it was given
    expect(await shared.ping()).toBe("PONG")
    shared.disconnect()
    await deleteKeys(prefix)
  })

  breakerRedisSuite("single node, a shared client", { connection: () => ({ client: shared }), prefix })
  breakerRedisSuite("single node, a url per replica", { connection: () => ({ url: REDIS_URL }), prefix })

  itRecording(
    "a closed breaker pays no Redis round trip per call: one script per flush, whatever the calls",
    () =>
      Effect.gen(function*() {
        const client = new Redis(REDIS_URL)
        yield* Effect.addFinalizer(() => Effect.sync(() => client.disconnect()))
        let scripts = 0
        const evalsha = client.evalsha.bind(client)
        client.evalsha = ((...args: Parameters<typeof client.evalsha>) => {
          scripts++
          return evalsha(...args)
        }) as typeof client.evalsha
        const breaker = yield* CircuitBreakerRedis.make({
          trip: CircuitBreaker.consecutive(5),
          openFor: "1 second",
          name: fresh("hot"),
          prefix,
          redis: { client },
          flushEvery: 100_000
        })
        const atStart = scripts // the state read before the breaker is returned
        expect(atStart).toBe(1)
        for (let i = 0; i < 1000; i++) yield* breaker.protect(ok)
        expect(scripts).toBe(atStart)
        yield* TestClock.adjust("100 millis")
        yield* eventually(Effect.sync(() => scripts === atStart + 1))
      })
  )

  itRecording(
    "flushEvery: a replica flushes after that many calls without waiting for the interval",
    () =>
      Effect.gen(function*() {
        const name = fresh("every")
        const options = { ...onShared(name, CircuitBreaker.consecutive(10)), flushEvery: 10 }
        const a = yield* CircuitBreakerRedis.make(options)
        const b = yield* CircuitBreakerRedis.make(options)
        for (let i = 0; i < 10; i++) yield* Effect.exit(a.protect(boom))
        // TestClock never moves: the 10th call's flush opened the fleet, and b hears it by pub/sub
        yield* eventually(Effect.map(b.state, (s) => s === "open"))
      })
  )

  itRecording(
    "its keys share the breaker's hash tag (one Cluster slot), and the channel is named after them",
    () =>
      Effect.gen(function*() {
        const name = fresh("keys:{odd}")
        const options = onShared(
          name,
          CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 100, window: { duration: "10 seconds" } })
        )
        const breaker = yield* CircuitBreakerRedis.make(options)
        yield* Effect.exit(breaker.protect(boom))
        yield* TestClock.adjust("100 millis")
        const keys = keysOf(prefix, name, resolveFleet(options).config.trip)
        expect(keys.window.endsWith(":w:t1000x10")).toBe(true)
        yield* eventually(Effect.promise(() => shared.exists(keys.window).then((n) => n === 1)))
        expect(yield* Effect.promise(() => shared.exists(keys.state))).toBe(1)
        expect(hashTag(keys.state)).toBe(hashTag(keys.window))
        expect(hashTag(keys.state)).toBe("keys%3A%7Bodd%7D-" + name.split("-").slice(1).join("-"))
        expect(yield* Effect.promise(() => shared.hget(keys.state, "state"))).toBe("closed")
        expect(yield* Effect.promise(() => shared.hgetall(keys.window))).toEqual({ c0: "1", f0: "1" })
      })
  )

  it.live("Redis unreachable: every call runs through the local breaker, which trips on its own; never an error of its own", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const name = fresh("down")
      const breaker = yield* CircuitBreakerRedis.make({
        trip: CircuitBreaker.consecutive(3),
        openFor: "1 minute",
        name,
        prefix,
        redis: { url: `redis://127.0.0.1:${port}` },
        timeout: "200 millis"
      })
      expect(yield* gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name })).toBe(1)
      expect(yield* breaker.protect(ok)).toBe("ok")
      for (let i = 0; i < 3; i++) {
        const exit = yield* Effect.exit(breaker.protect(boom))
        expect(Exit.isFailure(exit) && failureOption(exit.cause)._tag === "Some" && !isCircuitOpen(exit)).toBe(
          true
        )
      }
      expect(yield* breaker.state).toBe("open")
      expect(isCircuitOpen(yield* Effect.exit(breaker.protect(ok)))).toBe(true)
      expect(yield* counterValue(CircuitBreakerRedis.fleetFallbacksTotal, { breaker: name })).toBe(1)
    }).pipe(Effect.scoped))

  itRecording(
    "closing the scope flushes the counts left: the last replica's failures still reach the fleet",
    () =>
      Effect.gen(function*() {
        const options = onShared(fresh("last"), CircuitBreaker.consecutive(3), "1 minute")
        const b = yield* CircuitBreakerRedis.make(options)
        const scope = yield* Scope.make()
        const a = yield* inScope(scope)(CircuitBreakerRedis.make(options))
        for (let i = 0; i < 3; i++) yield* Effect.exit(a.protect(boom))
        expect(yield* b.state).toBe("closed")
        yield* Scope.close(scope, Exit.void)
        yield* eventually(Effect.map(b.state, (s) => s === "open"))
      })
  )

  it.live("a hung Redis: the breaker is built within its timeouts and calls never wait for Redis", () =>
    Effect.gen(function*() {
      const hole = yield* blackHole
      const started = performance.now()
      const breaker = yield* CircuitBreakerRedis.make({
        trip: CircuitBreaker.consecutive(3),
        openFor: "1 minute",
        name: fresh("hung"),
        prefix,
        redis: { url: `redis://127.0.0.1:${hole.port}`, redisOptions: { maxRetriesPerRequest: null } },
        timeout: "200 millis"
      })
      // subscribing and the first read each wait for `timeout`, then give up (a slow machine adds a little)
      expect(performance.now() - started).toBeLessThan(5_000)
      for (let i = 0; i < 100; i++) expect(yield* breaker.protect(ok)).toBe("ok")
      for (let i = 0; i < 3; i++) yield* Effect.exit(breaker.protect(boom))
      expect(isCircuitOpen(yield* Effect.exit(breaker.protect(ok)))).toBe(true)
    }).pipe(Effect.scoped))

  itRecording("an outage is logged once, not once per failed flush", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const { layer, lines } = captureLogs()
      yield* CircuitBreakerRedis.make({
        trip: CircuitBreaker.consecutive(3),
        openFor: "1 minute",
        name: fresh("log"),
        prefix,
        redis: { url: `redis://127.0.0.1:${port}` },
        timeout: "200 millis"
      }).pipe(Effect.provide(layer))
      // five more flushes, each failing: the flush fiber sleeps again once each is over
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust("100 millis")
        yield* untilSleeping((yield* Clock.currentTimeMillis) + 100)
      }
      const outage = lines.filter((l) => l.includes("Redis failed"))
      expect(outage).toHaveLength(1)
      expect(outage[0]).toMatch(/^WARN /)
    }))
  scoped("layer: the same breaker for a tag, shared by two layers of the same name", () =>
    Effect.gen(function*() {
      class A extends ServiceKey<A, CircuitBreaker.CircuitBreaker>()("A") {}
      class B extends ServiceKey<B, CircuitBreaker.CircuitBreaker>()("B") {}
      const options = onShared(fresh("layer"), CircuitBreaker.consecutive(2), "1 minute")
      yield* Effect.gen(function*() {
        const a = yield* A
        const b = yield* B
        yield* Effect.exit(a.protect(boom))
        yield* Effect.exit(a.protect(boom))
        yield* TestClock.adjust("100 millis")
        yield* eventually(Effect.map(b.state, (s) => s === "open"))
      }).pipe(
        Effect.provide(CircuitBreakerRedis.layer(A, options)),
        Effect.provide(CircuitBreakerRedis.layer(B, options))
      )
    }))

  /** A client of our own whose scripts can be held (until `release`) or made to fail. */
  const controlledClient = Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(REDIS_URL)
      client.on("error", () => {})
      const control = { scripts: 0, fail: false, gate: undefined as Promise<void> | undefined }
      const evalsha = client.evalsha.bind(client)
      client.evalsha = (async (...args: Parameters<typeof client.evalsha>) => {
        control.scripts++
        if (control.gate !== undefined) await control.gate
        if (control.fail) throw new Error("Redis refused")
        return evalsha(...args)
      }) as unknown as typeof client.evalsha
      return { client, control }
    }),
    ({ client }) => Effect.sync(() => client.disconnect())
  )

  /** Moves TestClock by one flush interval and waits until the flush fibers sleep until the next one. */
  const flushOnce = (n = 1) =>
    Effect.gen(function*() {
      yield* TestClock.adjust("100 millis")
      yield* untilSleeping((yield* Clock.currentTimeMillis) + 100, n)
    })

  itRecording(
    "the state's expiry is renewed at every flush, not only when it changes: a breaker in use keeps it",
    () =>
      Effect.gen(function*() {
        const name = fresh("ttl")
        const options = onShared(name, CircuitBreaker.consecutive(5))
        const breaker = yield* CircuitBreakerRedis.make(options)
        const keys = keysOf(prefix, name, resolveFleet(options).config.trip)
        // a day has almost gone by since the state last changed
        expect(yield* Effect.promise(() => shared.pexpire(keys.state, 5000))).toBe(1)
        yield* breaker.protect(ok)
        yield* flushOnce()
        expect(yield* Effect.promise(() => shared.pttl(keys.state))).toBeGreaterThan(86_000_000)
      })
  )

  itRecording(
    "the state restored to an earlier snapshot that reaches the same epoch again: a trial of the old period decides nothing",
    () =>
      Effect.gen(function*() {
        const name = fresh("collision")
        const options: CircuitBreakerRedis.Options = {
          ...onShared(name, CircuitBreaker.consecutive(1)),
          halfOpenTimeout: "1 minute"
        }
        const keys = keysOf(prefix, name, resolveFleet(options).config.trip)
        const a = yield* CircuitBreakerRedis.make(options)
        yield* Effect.exit(a.protect(boom))
        yield* flushOnce()
        expect(yield* a.state).toBe("open") // epoch 1
        // an operator's snapshot of the open state
        const snapshot = yield* Effect.promise(() => shared.hgetall(keys.state))
        yield* TestClock.adjust("1 second")
        // a trial of the half-open period (epoch 2, from t = 1.1 s) that runs long
        const gate = yield* Deferred.make<void>()
        let started = false
        const trial = yield* fork(
          a.protect(Effect.andThen(Effect.sync(() => (started = true)), Effect.as(Deferred.await(gate), "late")))
        )
        yield* eventually(Effect.sync(() => started))
        // the state is set back to the snapshot: the next call half-opens it again, epoch 2 again, a later period
        yield* Effect.promise(() => shared.del(keys.state).then(() => shared.hset(keys.state, snapshot)))
        yield* flushOnce()
        expect(yield* Effect.promise(() => shared.hmget(keys.state, "state", "epoch", "taken"))).toEqual([
          "half-open",
          "2",
          "0"
        ])
        // the old period's trial succeeds: it is not this period's trial, so it closes nothing
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(trial)).toBe("late")
        yield* flushOnce()
        expect(yield* Effect.promise(() => shared.hget(keys.state, "state"))).toBe("half-open")
        expect(yield* a.state).toBe("half-open")
      })
  )

  itRecording(
    "the state lost (expired, FLUSHDB) and made again by the replica that made it: a new incarnation, the fleet works again",
    () =>
      Effect.gen(function*() {
        const name = fresh("lost")
        const options = onShared(name, CircuitBreaker.consecutive(2))
        const keys = keysOf(prefix, name, resolveFleet(options).config.trip)
        // the only replica: it made the state, and it makes it again
        const a = yield* CircuitBreakerRedis.make(options)
        yield* Effect.exit(a.protect(boom))
        yield* Effect.exit(a.protect(boom))
        yield* flushOnce()
        expect(yield* a.state).toBe("open") // epoch 1
        yield* Effect.promise(() => shared.del(keys.state, keys.window))
        yield* TestClock.adjust("1 second")
        yield* untilSleeping((yield* Clock.currentTimeMillis) + 100)
        // its flush made the state again (closed, epoch 0): it takes it, not refusing as a stale half-open
        expect(yield* a.protect(ok)).toBe("ok")
        expect(yield* a.state).toBe("closed")
        // and the fleet opens again on its failures
        yield* Effect.exit(a.protect(boom))
        yield* Effect.exit(a.protect(boom))
        yield* flushOnce()
        expect(yield* a.state).toBe("open")
        expect(yield* Effect.promise(() => shared.hget(keys.state, "state"))).toBe("open")
      })
  )

  itRecording(
    "a replica with another trip policy (a new version rolling out) has a window of its own and shares the state",
    () =>
      Effect.gen(function*() {
        const name = fresh("policy")
        const base = { openFor: "1 minute", name, prefix, redis: { client: shared } } as const
        const rate = CircuitBreaker.failureRate({
          threshold: 0.5,
          minimumCalls: 100,
          window: { duration: "10 seconds" }
        })
        const a = yield* CircuitBreakerRedis.make({ ...base, trip: rate })
        yield* Effect.exit(a.protect(boom))
        yield* flushOnce()
        const b = yield* CircuitBreakerRedis.make({ ...base, trip: CircuitBreaker.consecutive(2) })
        yield* Effect.exit(b.protect(boom))
        yield* Effect.exit(b.protect(boom))
        yield* flushOnce(2)
        // b's failures opened the fleet (a too): b never fell back on a window of another type (WRONGTYPE)
        expect(yield* gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name })).toBe(0)
        yield* eventually(Effect.map(a.state, (s) => s === "open"))
      })
  )

  itRecording(
    "a message of another incarnation (a same-named breaker elsewhere) is not believed; the replica asks Redis",
    () =>
      Effect.gen(function*() {
        const { client, control } = yield* controlledClient
        const name = fresh("foreign")
        const options: CircuitBreakerRedis.Options = {
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 minute",
          name,
          prefix,
          redis: { client }
        }
        const a = yield* CircuitBreakerRedis.make(options)
        const before = control.scripts
        const channel = channelOf(client, keysOf(prefix, name, resolveFleet(options).config.trip).channel)
        const heard = yield* Effect.promise(() => shared.publish(channel, "elsewhere.1|1|open|99999999999999|0|1|0"))
        expect(heard).toBe(1)
        // the message was heard: it asked Redis at once (no clock moved), and stays closed
        yield* eventually(Effect.sync(() => control.scripts === before + 1))
        yield* untilSleeping((yield* Clock.currentTimeMillis) + 100)
        expect(yield* a.state).toBe("closed")
        expect(yield* a.protect(ok)).toBe("ok")
      })
  )

  scoped(
    "the channel carries the client's keyPrefix and database, as pub/sub knows neither",
    () =>
      Effect.gen(function*() {
        const name = fresh("channel")
        const url = new URL(REDIS_URL)
        const db = Number(url.pathname.slice(1) || "0")
        const options: CircuitBreakerRedis.Options = {
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 minute",
          name,
          prefix,
          redis: { url: REDIS_URL, redisOptions: { keyPrefix: "app1:" } }
        }
        yield* CircuitBreakerRedis.make(options)
        const channel = `app1:${keysOf(prefix, name, resolveFleet(options).config.trip).channel}${
          db === 0 ? "" : `:db${db}`
        }`
        const numsub = yield* Effect.promise(() => shared.pubsub("NUMSUB", channel))
        expect(numsub).toEqual([channel, 1])
      })
  )

  itRecording(
    "a flush every flushInterval from the last one's start, however long it took (a fixed rate)",
    () =>
      Effect.gen(function*() {
        const { client, control } = yield* controlledClient
        yield* CircuitBreakerRedis.make({
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 minute",
          name: fresh("rate"),
          prefix,
          redis: { client },
          timeout: "10 seconds"
        })
        const t0 = yield* Clock.currentTimeMillis
        let release = () => {}
        control.gate = new Promise<void>((resolve) => (release = resolve))
        const before = control.scripts
        yield* TestClock.adjust("100 millis")
        yield* eventually(Effect.sync(() => control.scripts === before + 1))
        // the flush takes 30 ms (of the breaker's clock)
        yield* TestClock.adjust("30 millis")
        control.gate = undefined
        release()
        // the next one is due 100 ms after the last one started, not 100 ms after it ended
        yield* untilSleeping(t0 + 200)
      })
  )

  it.live("a subscription that failed (Redis down when the breaker was built) is made when Redis is back", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const name = fresh("resubscribe")
      const options: CircuitBreakerRedis.Options = {
        trip: CircuitBreaker.consecutive(2),
        openFor: "1 minute",
        name,
        prefix,
        redis: { url: `redis://127.0.0.1:${port}` },
        timeout: "200 millis"
      }
      yield* CircuitBreakerRedis.make(options)
      const server = yield* Effect.promise(() => redisServer.startRedisServer(port))
      yield* Effect.addFinalizer(() => Effect.promise(() => redisServer.kill(server)))
      const probe = yield* Effect.acquireRelease(
        Effect.sync(() => new Redis(`redis://127.0.0.1:${port}`)),
        (c) => Effect.sync(() => c.disconnect())
      )
      const channel = keysOf(prefix, name, resolveFleet(options).config.trip).channel
      yield* eventually(
        Effect.promise(() => probe.pubsub("NUMSUB", channel).then((r) => r[1] === 1)),
        { within: "20 seconds" }
      )
    }).pipe(Effect.scoped))

  scoped(
    "a replica disposed while Redis fails: no local breaker, no warning, and its fallback gauge is 0",
    () =>
      Effect.gen(function*() {
        const { client, control } = yield* controlledClient
        const { layer, lines } = captureLogs()
        const name = fresh("dispose")
        yield* Effect.gen(function*() {
          const scope = yield* Scope.make()
          const a = yield* inScope(scope)(
            CircuitBreakerRedis.make({
              trip: CircuitBreaker.consecutive(5),
              openFor: "1 minute",
              name,
              prefix,
              redis: { client }
            })
          )
          yield* Effect.exit(a.protect(boom))
          control.fail = true
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(layer))
        expect(lines.filter((l) => l.includes("Redis failed"))).toEqual([])
        expect(yield* gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name })).toBe(0)
      })
  )

  itRecording("a replica in fallback when disposed sets its fallback gauge back to 0", () =>
    Effect.gen(function*() {
      const { client, control } = yield* controlledClient
      const name = fresh("dispose-local")
      const scope = yield* Scope.make()
      yield* inScope(scope)(
        CircuitBreakerRedis.make({
          trip: CircuitBreaker.consecutive(5),
          openFor: "1 minute",
          name,
          prefix,
          redis: { client }
        })
      )
      control.fail = true
      yield* flushOnce()
      expect(yield* gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name })).toBe(1)
      yield* Scope.close(scope, Exit.void)
      expect(yield* gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name })).toBe(0)
    }))

  itRecording(
    "the openFor schedule is stepped once per opening count, not at every script call",
    () =>
      Effect.gen(function*() {
        let steps = 0
        const breaker = yield* CircuitBreakerRedis.make({
          trip: CircuitBreaker.consecutive(5),
          openFor: Schedule.exponential("1 second").pipe(tapSchedule(() => Effect.sync(() => steps++))),
          name: fresh("delay"),
          prefix,
          redis: { client: shared }
        })
        const atStart = steps // probing the schedule, and the first flush
        for (let i = 0; i < 5; i++) {
          yield* breaker.protect(ok)
          yield* flushOnce()
        }
        expect(steps).toBe(atStart)
      })
  )

  describe("wiring mistakes are loud", () => {
    it("a missing name, an empty name or a missing connection throws an illegal-argument error", () => {
      const base = { trip: CircuitBreaker.consecutive(3), openFor: "1 second" } as const
      expect(() => CircuitBreakerRedis.make({ ...base, redis: { url: REDIS_URL } } as never)).toThrow(/needs a name/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "", redis: { url: REDIS_URL } })).toThrow(/needs a name/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x" } as never)).toThrow(/needs redis/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x", prefix: "a{", redis: { url: REDIS_URL } })).toThrow(
        /prefix/
      )
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x", flushInterval: 0, redis: { url: REDIS_URL } }))
        .toThrow(/flushInterval/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x", halfOpenTimeout: 0, redis: { url: REDIS_URL } }))
        .toThrow(/halfOpenTimeout/)
    })
  })
})
