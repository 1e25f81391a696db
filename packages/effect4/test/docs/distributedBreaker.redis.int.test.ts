import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Schedule } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

class Upstreams extends Context.Service<Upstreams, CircuitBreaker.Keyed<string>>()("Upstreams") {}

// One fleet breaker per origin, shared by every replica that runs this layer with the same name. Built once,
// with the app: a registry built per request would connect to Redis and read every key's state each time.
const UpstreamsLive = (name: string) =>
  Layer.effect(
    Upstreams,
    CircuitBreakerRedis.keyed({
      trip: CircuitBreaker.consecutive(5),
      openFor: "30 seconds",
      name,
      redis: { url: REDIS_URL },
      maxKeys: 100
    })
  )

// the upstreams, as this test plays them: a.example is down
let sent = 0
const fetchFrom = (url: URL) =>
  Effect.suspend(() => {
    sent++
    return url.hostname === "a.example" ? Effect.fail(new Error("503 from a.example")) : Effect.succeed(42)
  })

const price = (url: URL) => Effect.flatMap(Upstreams, (upstreams) => fetchFrom(url).pipe(upstreams.protect(url.origin)))

const a = new URL("https://a.example/prices")
const b = new URL("https://b.example/prices")

/** What a call refused by its breaker was told: `CircuitOpen`, with the failure that opened it if known. */
const refusal = (exit: Exit.Exit<unknown, unknown>) =>
  Option.getOrUndefined(Option.filter(Exit.findErrorOption(exit), (e) => e instanceof CircuitBreaker.CircuitOpen))

describe("a fleet breaker per origin", () => {
  it.live("five failures of one origin open it for every replica; the other origins still flow", () =>
    Effect.gen(function*() {
      const name = `docs-prices-${process.pid}-${Date.now()}` // a fleet of its own for each run of the test

      // replica 1: a.example fails five times in a row
      yield* Effect.gen(function*() {
        for (let i = 0; i < 5; i++) yield* Effect.exit(price(a))
        // its counts reach Redis at the next flush (100 ms), which opens a.example for the fleet
        const breaker = yield* Effect.flatMap(Upstreams, (upstreams) => upstreams.get(a.origin))
        yield* breaker.state.pipe(Effect.repeat({ until: (s) => s === "open", schedule: Schedule.spaced("10 millis") }))
        const refused = refusal(yield* Effect.exit(price(a)))
        // this replica's failures opened it: it can say why
        expect(String(refused?.lastFailure)).toBe("Error: 503 from a.example")
        expect(yield* price(b)).toBe(42)
      }).pipe(Effect.provide(UpstreamsLive(name)))
      expect(sent).toBe(6)

      // replica 2 (another process, or this one restarted): a.example is open from its first call
      yield* Effect.gen(function*() {
        const refused = refusal(yield* Effect.exit(price(a)))
        expect(refused).toBeDefined()
        expect(refused !== undefined && "lastFailure" in refused).toBe(false) // opened by another replica
        expect(yield* price(b)).toBe(42)
      }).pipe(Effect.provide(UpstreamsLive(name)))
      expect(sent).toBe(7)
    }))
})
