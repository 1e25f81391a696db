/**
 * The HTTP client's retry metrics: `Retry.retriesTotal` and `Retry.exhaustedTotal` in series labelled `client` (the
 * client's `name`, default `"default"`) and `origin` (at most `maxOriginLabels` of them per client, then `"other"`),
 * never in the unlabelled series `Retry.retry` counts in. A series is read with all its labels.
 */
import { counterValue, fork, provideHttpClient, scoped, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Backoff, ResilientHttpClient, Retry } from "effect-resilience"
import { scriptedClient } from "./support/memoryHttp.js"

const schedule = Backoff.exponential({ base: "100 millis", cap: "1 second" })

/** Runs `effect` to its end, moving the clock through every backoff; its failure is ignored. */
const settle = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* fork(Effect.exit(effect))
    yield* TestClock.adjust("1 minute")
    yield* Fiber.join(fiber)
  })

/** How much each of `reads` moves while `effect` runs. */
const deltas = <E, R>(reads: ReadonlyArray<Effect.Effect<number>>, effect: Effect.Effect<unknown, E, R>) =>
  Effect.gen(function*() {
    const before = yield* Effect.all(reads)
    yield* effect
    const after = yield* Effect.all(reads)
    return after.map((n, i) => n - before[i]!)
  })

const retries = (client: string, origin: string) => counterValue(Retry.retriesTotal, { client, origin })
const gaveUp = (client: string, origin: string, reason: Retry.StopReason) =>
  counterValue(Retry.exhaustedTotal, { client, origin, reason })

describe("ResilientHttpClient: retry metrics per client and origin", () => {
  it.effect("retries are counted under the client's name and the request's origin", () =>
    Effect.gen(function*() {
      const prices = (yield* scriptedClient([503, 503, 200])).client.pipe(
        ResilientHttpClient.retry({ schedule, maxAttempts: 4, name: "prices" })
      )
      const orders = (yield* scriptedClient([503, 200])).client.pipe(
        ResilientHttpClient.retry({ schedule, maxAttempts: 4, name: "orders" })
      )
      const counted = yield* deltas(
        [
          retries("prices", "http://prices.test"),
          retries("orders", "http://orders.test:8080"),
          counterValue(Retry.retriesTotal)
        ],
        Effect.andThen(settle(prices.get("http://prices.test/quote")), settle(orders.get("http://orders.test:8080/x")))
      )
      // two retries to prices.test, one to orders.test:8080, none in Retry.retry's own, unlabelled series
      expect(counted).toEqual([2, 1, 0])
    }))

  it.effect("a series is read with every label it has: a subset of them reads another series", () =>
    Effect.gen(function*() {
      const client = (yield* scriptedClient([503, 200])).client.pipe(
        ResilientHttpClient.retry({ schedule, maxAttempts: 4, name: "subset" })
      )
      const counted = yield* deltas(
        [counterValue(Retry.retriesTotal, { client: "subset" }), retries("subset", "https://a.test")],
        settle(client.get("https://a.test/x"))
      )
      expect(counted).toEqual([0, 1])
    }))

  it.effect("giving up is counted with the client, the origin and the reason", () =>
    Effect.gen(function*() {
      const client = (yield* scriptedClient([503])).client.pipe(
        ResilientHttpClient.retry({ schedule, maxAttempts: 2, name: "exhausted" })
      )
      const counted = yield* deltas(
        [gaveUp("exhausted", "http://down.test", "attempts"), retries("exhausted", "http://down.test")],
        settle(client.get("http://down.test/status"))
      )
      expect(counted).toEqual([1, 1])
    }))

  it.effect("a client without a name is labelled default", () =>
    Effect.gen(function*() {
      const client = (yield* scriptedClient([503, 200])).client.pipe(ResilientHttpClient.retry({ schedule }))
      const counted = yield* deltas(
        [retries("default", "http://unnamed.test")],
        settle(client.get("http://unnamed.test/"))
      )
      expect(counted).toEqual([1])
    }))

  scoped("the preset's name option labels its retries", () =>
    Effect.gen(function*() {
      const { client: base } = yield* scriptedClient([503, 503, 200])
      const client = yield* ResilientHttpClient.make({ name: "preset", retry: { schedule, maxAttempts: 4 } }).pipe(
        provideHttpClient(base)
      )
      const counted = yield* deltas(
        [retries("preset", "http://preset.test")],
        settle(client.get("http://preset.test/a"))
      )
      expect(counted).toEqual([2])
    }))

  it.effect("past maxOriginLabels origins, a client counts the others under origin other", () =>
    Effect.gen(function*() {
      const client = (yield* scriptedClient([503])).client.pipe(
        ResilientHttpClient.retry({ schedule, maxAttempts: 2, name: "capped", maxOriginLabels: 2 })
      )
      const counted = yield* deltas(
        [
          retries("capped", "http://a.test"),
          retries("capped", "http://b.test"),
          retries("capped", "http://c.test"),
          retries("capped", "other"),
          gaveUp("capped", "other", "attempts")
        ],
        Effect.forEach(["a", "b", "c", "d", "a"], (host) => settle(client.get(`http://${host}.test/`)))
      )
      // a and b came first and keep their labels; c and d share "other", which never takes a label of its own
      expect(counted).toEqual([2, 1, 0, 2, 2])
    }))

  it("rejects a bad name or maxOriginLabels when the combinator or the preset is built", () => {
    expect(() => ResilientHttpClient.retry({ name: "" })).toThrow(/name/)
    expect(() => ResilientHttpClient.retry({ maxOriginLabels: -1 })).toThrow(/maxOriginLabels/)
    expect(() => ResilientHttpClient.retry({ maxOriginLabels: 1.5 })).toThrow(/maxOriginLabels/)
    expect(() => ResilientHttpClient.make({ name: "" })).toThrow(/name/)
    expect(() => ResilientHttpClient.make({ retry: { maxOriginLabels: NaN } })).toThrow(/maxOriginLabels/)
  })
})
