import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Metric, TestClock } from "effect"
import { Redis } from "ioredis"
import * as CircuitBreakerRedis from "../src/CircuitBreaker/Redis.js"
import { CircuitBreaker } from "../src/index.js"
import { keysOf } from "../src/internal/circuitBreaker/redis.js"
import { breakerRedisSuite, isCircuitOpen } from "./breakerRedisSuite.js"
import { eventually } from "./support/eventually.js"
import { closedPort, deleteKeys, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { describeRedis } from "./support/services.js"

const prefix = uniquePrefix("cb")
const shared = new Redis(REDIS_URL, { lazyConnect: true })
shared.on("error", () => {})

let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${++counter}`

/** Where Redis Cluster hashes a key: the text between the first `{` and the next `}`, if not empty. */
const hashTag = (key: string): string => {
  const open = key.indexOf("{")
  const close = open === -1 ? -1 : key.indexOf("}", open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
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

  it.scoped("a closed breaker pays no Redis round trip per call: one script per flush, whatever the calls", () =>
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
    }))

  it.scoped("flushEvery: a replica flushes after that many calls without waiting for the interval", () =>
    Effect.gen(function*() {
      const name = fresh("every")
      const options = {
        trip: CircuitBreaker.consecutive(10),
        openFor: "1 second",
        name,
        prefix,
        redis: { client: shared },
        flushEvery: 10
      } as const
      const a = yield* CircuitBreakerRedis.make(options)
      const b = yield* CircuitBreakerRedis.make(options)
      for (let i = 0; i < 10; i++) yield* Effect.exit(a.protect(boom))
      // TestClock never moves: the 10th call's flush opened the fleet, and b hears it by pub/sub
      yield* eventually(Effect.map(b.state, (s) => s === "open"))
    }))

  it.scoped("its keys share the breaker's hash tag (one Cluster slot), and the channel is named after them", () =>
    Effect.gen(function*() {
      const name = fresh("keys:{odd}")
      const breaker = yield* CircuitBreakerRedis.make({
        trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 100, window: { duration: "10 seconds" } }),
        openFor: "1 second",
        name,
        prefix,
        redis: { client: shared }
      })
      yield* Effect.exit(breaker.protect(boom))
      yield* TestClock.adjust("100 millis")
      const keys = keysOf(prefix, name)
      yield* eventually(Effect.promise(() => shared.exists(keys.window).then((n) => n === 1)))
      expect(yield* Effect.promise(() => shared.exists(keys.state))).toBe(1)
      expect(hashTag(keys.state)).toBe(hashTag(keys.window))
      expect(hashTag(keys.state)).toBe("keys%3A%7Bodd%7D-" + name.split("-").slice(1).join("-"))
      expect(yield* Effect.promise(() => shared.hget(keys.state, "state"))).toBe("closed")
      expect(yield* Effect.promise(() => shared.hgetall(keys.window))).toEqual({ c0: "1", f0: "1" })
    }))

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
      const gauge = CircuitBreakerRedis.fleetFallbackGauge.pipe(Metric.tagged("breaker", name))
      expect((yield* Metric.value(gauge)).value).toBe(1)
      expect(yield* breaker.protect(ok)).toBe("ok")
      for (let i = 0; i < 3; i++) {
        const exit = yield* Effect.exit(breaker.protect(boom))
        expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause)._tag === "Some" && !isCircuitOpen(exit)).toBe(
          true
        )
      }
      expect(yield* breaker.state).toBe("open")
      expect(isCircuitOpen(yield* Effect.exit(breaker.protect(ok)))).toBe(true)
      const fallbacks = CircuitBreakerRedis.fleetFallbacksTotal.pipe(Metric.tagged("breaker", name))
      expect((yield* Metric.value(fallbacks)).count).toBe(1)
    }).pipe(Effect.scoped))

  describe("wiring mistakes are loud", () => {
    it("a missing name, an empty name or a missing connection throws IllegalArgumentException", () => {
      const base = { trip: CircuitBreaker.consecutive(3), openFor: "1 second" } as const
      expect(() => CircuitBreakerRedis.make({ ...base, redis: { url: REDIS_URL } } as never)).toThrow(/needs a name/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "", redis: { url: REDIS_URL } })).toThrow(/needs a name/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x" } as never)).toThrow(/needs redis/)
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x", prefix: "a{", redis: { url: REDIS_URL } })).toThrow(
        /prefix/
      )
      expect(() => CircuitBreakerRedis.make({ ...base, name: "x", flushInterval: 0, redis: { url: REDIS_URL } }))
        .toThrow(/flushInterval/)
    })
  })
})
