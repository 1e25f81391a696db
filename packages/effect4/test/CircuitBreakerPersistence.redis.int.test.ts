import { afterAll, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { CircuitBreaker as Persisted } from "effect/persistence"
import { TestClock } from "effect/testing"
import { Redis } from "ioredis"
import * as CircuitBreakerPersistence from "../src/CircuitBreaker/Persistence.js"
import * as CircuitBreakerRedis from "../src/CircuitBreaker/Redis.js"
import { CircuitBreaker } from "../src/index.js"
import { eventually } from "./support/eventually.js"
import { deleteKeys, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { describeRedis } from "./support/services.js"
import { recordingSleeps, untilSleeping } from "./support/sleeps.js"

// CircuitBreaker/Persistence (Effect 4 only: Effect's own `effect/persistence` CircuitBreaker service) over fleet
// breakers. What every fleet breaker and keyed registry does is the contract's (test/contract/breakerRedisSuite.ts,
// CircuitBreaker.keyed.redis.int.test.ts), run by both editions.

const prefix = uniquePrefix("cbpersist")
let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${++counter}`

const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")

const ownClient = Effect.acquireRelease(
  Effect.sync(() => {
    const client = new Redis(REDIS_URL)
    client.on("error", () => {})
    return client
  }),
  (client) => Effect.sync(() => client.disconnect())
)

const options = (name: string, client: Redis): CircuitBreakerRedis.KeyedOptions => ({
  trip: CircuitBreaker.consecutive(2),
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

describeRedis("CircuitBreaker/Persistence over CircuitBreaker/Redis keyed", () => {
  afterAll(() => deleteKeys(prefix))

  it.effect("two replicas' bridges share each key's state", () =>
    recordingSleeps(Effect.gen(function*() {
      const client = yield* ownClient
      const name = fresh("bridge")
      const a = yield* CircuitBreakerPersistence.fromKeyed(yield* CircuitBreakerRedis.keyed(options(name, client)))
      const b = yield* CircuitBreakerPersistence.fromKeyed(yield* CircuitBreakerRedis.keyed(options(name, client)))
      for (let i = 0; i < 2; i++) yield* Effect.exit(a.execute(boom, { key: "partner" }))
      expect((yield* b.state("partner"))._tag).toBe("Closed") // b has no breaker of the key yet
      yield* Effect.exit(b.execute(ok, { key: "partner" }))
      yield* flushOnce(2)
      yield* eventually(Effect.map(b.state("partner"), (s) => s._tag === "Open"))
      const refused = yield* Effect.flip(b.execute(ok, { key: "partner" }))
      expect(refused).toBeInstanceOf(Persisted.CircuitBreakerError)
      expect(refused.reason).toMatchObject({ _tag: "CircuitOpen", key: "partner" })
      // another key is a fleet breaker of its own
      expect(yield* b.execute(ok, { key: "other" })).toBe("ok")
    })))
})
