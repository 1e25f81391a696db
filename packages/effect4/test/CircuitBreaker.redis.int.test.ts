import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Clock, type Duration, Effect, Exit, Logger, Metric, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Redis } from "ioredis"
import * as CircuitBreakerRedis from "../src/CircuitBreaker/Redis.js"
import { CircuitBreaker } from "../src/index.js"
import { keysOf, resolveFleet } from "../src/internal/circuitBreaker/redis.js"
import { breakerRedisSuite, isCircuitOpen } from "./breakerRedisSuite.js"
import { eventually } from "./support/eventually.js"
import { blackHole, closedPort, deleteKeys, hashTag, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { itRecording } from "./support/redisServer.js"
import { describeRedis } from "./support/services.js"
import { untilSleeping } from "./support/sleeps.js"

const prefix = uniquePrefix("cb")
const shared = new Redis(REDIS_URL, { lazyConnect: true })
shared.on("error", () => {})

let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${++counter}`

/** A breaker named `name` on the shared client, under this file's prefix. */
const onShared = (
  name: string,
  trip: CircuitBreaker.TripPolicy,
  openFor: Duration.Input = "1 second"
): CircuitBreakerRedis.Options => ({ trip, openFor, name, prefix, redis: { client: shared } })

/** A logger that keeps the messages of warnings and infos. */
const capture = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    lines.push(`${logLevel.toUpperCase()} ${text}`)
  })
  return { lines, layer: Logger.layer([logger]) }
}

const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")

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
      const gauge = CircuitBreakerRedis.fleetFallbackGauge.pipe(Metric.withAttributes({ breaker: name }))
      expect((yield* Metric.value(gauge)).value).toBe(1)
      expect(yield* breaker.protect(ok)).toBe("ok")
      for (let i = 0; i < 3; i++) {
        const exit = yield* Effect.exit(breaker.protect(boom))
        expect(Exit.isFailure(exit) && Cause.findErrorOption(exit.cause)._tag === "Some" && !isCircuitOpen(exit)).toBe(
          true
        )
      }
      expect(yield* breaker.state).toBe("open")
      expect(isCircuitOpen(yield* Effect.exit(breaker.protect(ok)))).toBe(true)
      const fallbacks = CircuitBreakerRedis.fleetFallbacksTotal.pipe(Metric.withAttributes({ breaker: name }))
      expect((yield* Metric.value(fallbacks)).count).toBe(1)
    }).pipe(Effect.scoped))

  itRecording(
    "closing the scope flushes the counts left: the last replica's failures still reach the fleet",
    () =>
      Effect.gen(function*() {
        const options = onShared(fresh("last"), CircuitBreaker.consecutive(3), "1 minute")
        const b = yield* CircuitBreakerRedis.make(options)
        const scope = yield* Scope.make()
        const a = yield* Scope.provide(scope)(CircuitBreakerRedis.make(options))
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
      const { layer, lines } = capture()
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
  describe("wiring mistakes are loud", () => {
    it("a missing name, an empty name or a missing connection throws IllegalArgumentError", () => {
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
