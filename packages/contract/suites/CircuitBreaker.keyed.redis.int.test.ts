import {
  captureLogs,
  closedPort,
  deleteKeys,
  describeRedis,
  eventually,
  gaugeValue,
  hashTag,
  itRecording,
  keysOf,
  REDIS_URL,
  TestClock,
  uniquePrefix,
  untilSleeping
} from "#edition"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
import { Redis } from "ioredis"
import { isCircuitOpen } from "./breakerRedisSuite.js"

// CircuitBreakerRedis.keyed: one fleet breaker per key, on one client and one pub/sub connection. (What every
// fleet breaker does is the contract suite's, breakerRedisSuite.ts; its keyed test runs on a Cluster too.)

const prefix = uniquePrefix("cbkeyed")
let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${++counter}`

const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")
const trip = CircuitBreaker.consecutive(2)

/** A client of the test's own that counts the scripts it runs and the connections duplicated from it. */
const countingClient = Effect.acquireRelease(
  Effect.sync(() => {
    const client = new Redis(REDIS_URL)
    client.on("error", () => {})
    const counts = { scripts: 0, duplicates: 0 }
    const evalsha = client.evalsha.bind(client)
    client.evalsha = ((...args: Parameters<typeof client.evalsha>) => {
      counts.scripts++
      return evalsha(...args)
    }) as typeof client.evalsha
    const duplicate = client.duplicate.bind(client)
    client.duplicate = ((...args: Parameters<typeof client.duplicate>) => {
      counts.duplicates++
      return duplicate(...args)
    }) as typeof client.duplicate
    return { client, counts }
  }),
  ({ client }) => Effect.sync(() => client.disconnect())
)

const options = (name: string, client: Redis): CircuitBreakerRedis.KeyedOptions => ({
  trip,
  openFor: "10 seconds",
  name,
  prefix,
  redis: { client },
  flushEvery: 100_000
})

/** Moves TestClock by one flush interval and waits until `n` flush fibers sleep until the next one. */
const flushOnce = (n: number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust("100 millis")
    yield* untilSleeping((yield* Clock.currentTimeMillis) + 100, n)
  })

describeRedis("CircuitBreaker/Redis keyed", () => {
  afterAll(() => deleteKeys(prefix))

  itRecording(
    "a key's Redis names are the name and the key, escaped, in one hash tag: keys spread over the slots",
    () =>
      Effect.gen(function*() {
        const { client } = yield* countingClient
        const name = fresh("names")
        const registry = yield* CircuitBreakerRedis.keyed(options(name, client))
        yield* Effect.exit(registry.protect(boom, "tenant:{7}"))
        yield* flushOnce(1)
        const keys = keysOf(prefix, name, trip, "tenant:{7}")
        expect(hashTag(keys.state)).toBe(`${name}:tenant%3A%7B7%7D`)
        expect(yield* Effect.promise(() => client.exists(keys.state, keys.window))).toBe(2)
        // not the state of the breaker of the name alone, nor of another key
        expect(yield* Effect.promise(() => client.exists(keysOf(prefix, name, trip).state))).toBe(0)
      })
  )

  itRecording(
    "callers of a key not built yet wait for one build: one breaker, one first read of Redis",
    () =>
      Effect.gen(function*() {
        const { client, counts } = yield* countingClient
        const registry = yield* CircuitBreakerRedis.keyed(options(fresh("herd"), client))
        const before = counts.scripts
        const breakers = yield* Effect.all(Array.from({ length: 20 }, () => registry.get("k")), {
          concurrency: "unbounded"
        })
        expect(new Set(breakers).size).toBe(1)
        expect(counts.scripts - before).toBe(1)
      })
  )

  itRecording(
    "every key shares the one pub/sub connection; an idle key sends nothing, a used one flushes",
    () =>
      Effect.gen(function*() {
        const { client, counts } = yield* countingClient
        const registry = yield* CircuitBreakerRedis.keyed(options(fresh("idle"), client))
        for (const key of ["a", "b", "c", "d", "e"]) yield* registry.protect(ok, key)
        expect(counts.duplicates).toBe(1)
        // every key was used since its first read: each flushes once, then none has anything to say
        yield* flushOnce(5)
        const quiet = counts.scripts
        for (let i = 0; i < 5; i++) yield* flushOnce(5)
        expect(counts.scripts).toBe(quiet)
        // a used key flushes at its next interval, and only it
        yield* registry.protect(ok, "c")
        yield* flushOnce(5)
        expect(counts.scripts).toBe(quiet + 1)
      })
  )

  itRecording(
    "beyond maxKeys the least recently used key goes; its counts were flushed and its state is in Redis",
    () =>
      Effect.gen(function*() {
        const { client } = yield* countingClient
        const registry = yield* CircuitBreakerRedis.keyed({ ...options(fresh("lru"), client), maxKeys: 2 })
        yield* Effect.exit(registry.protect(boom, "a")) // one failure of two, not flushed yet
        yield* registry.protect(ok, "b")
        yield* registry.protect(ok, "c")
        expect(yield* registry.keys).toEqual(["b", "c"])
        // "a" comes back: the failure counted before it was dropped reached Redis, so one more opens it
        yield* Effect.exit(registry.protect(boom, "a"))
        expect(yield* registry.keys).toEqual(["c", "a"])
        yield* flushOnce(2)
        expect(yield* (yield* registry.get("a")).state).toBe("open")
        expect(isCircuitOpen(yield* Effect.exit(registry.protect(ok, "a")))).toBe(true)
      })
  )

  it.live("Redis unreachable: every key runs on a local breaker, one warning for all of them, one gauge", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const name = fresh("down")
      const { layer, lines } = captureLogs()
      const registry = yield* CircuitBreakerRedis.keyed({
        trip,
        openFor: "1 minute",
        name,
        prefix,
        redis: { url: `redis://127.0.0.1:${port}` },
        timeout: "200 millis"
      }).pipe(Effect.provide(layer))
      for (const key of ["a", "b"]) {
        expect(yield* registry.protect(ok, key)).toBe("ok")
        yield* Effect.exit(registry.protect(boom, key))
        yield* Effect.exit(registry.protect(boom, key))
        expect(isCircuitOpen(yield* Effect.exit(registry.protect(ok, key)))).toBe(true)
      }
      expect(lines.filter((l) => l.includes("Redis failed"))).toHaveLength(1)
      yield* eventually(
        Effect.map(gaugeValue(CircuitBreakerRedis.fleetFallbackGauge, { breaker: name }), (g) => g === 1)
      )
    }).pipe(Effect.scoped))

  describe("wiring mistakes are loud", () => {
    it("a missing name or connection, or a bad maxKeys, throws an illegal-argument error", () => {
      const base = { trip, openFor: "1 second" } as const
      expect(() => CircuitBreakerRedis.keyed({ ...base, redis: { url: REDIS_URL } } as never)).toThrow(/needs a name/)
      expect(() => CircuitBreakerRedis.keyed({ ...base, name: "x" } as never)).toThrow(/needs redis/)
      expect(() => CircuitBreakerRedis.keyed({ ...base, name: "x", redis: { url: REDIS_URL }, maxKeys: 0 })).toThrow(
        /maxKeys/
      )
    })
  })
})
