import {
  blackHole,
  closedPort,
  deleteKeys,
  describeRedis,
  eventually,
  fc,
  hashTag,
  loggedMessages,
  REDIS_URL,
  serveWeb,
  TestClock,
  uniquePrefix
} from "#edition"
import { afterAll, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { RateLimiter, RateLimiterStore, RateLimitMiddleware } from "effect-resilience"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import { Redis } from "ioredis"
import { keyOf } from "../../src/internal/rateLimiterStore/redis.js"
import { rateLimiterSuite } from "./rateLimiterSuite.js"
import { fractionalSlidingWindow } from "./slidingWindow.js"

const prefix = uniquePrefix("rl")

/**
 * The suite runs on `TestClock`, which stands still while real time passes, whereas Redis expires keys
 * in real time: a generous margin keeps a key alive for the whole (real) length of a test. In
 * production both clocks move together and the default margin (1 s) only has to cover clock skew.
 */
const shared = new Redis(REDIS_URL, { lazyConnect: true })
const suiteLayer = RateLimiterStoreRedis.layer({ client: shared, prefix, expiryMargin: "1 minute" })

let counter = 0
const fresh = (what: string) => `${what}-${++counter}`

/** A plain client for looking at keys. */
const inspect = <A>(f: (client: Redis) => Promise<A>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Redis(REDIS_URL)),
    (client) => Effect.promise(() => f(client)),
    (client) => Effect.sync(() => client.disconnect())
  )

const withStore = <A, E>(
  layer: Layer.Layer<RateLimiterStore.RateLimiterStore>,
  f: (store: RateLimiterStore.Store) => Effect.Effect<A, E>
) => Effect.flatMap(RateLimiterStore.RateLimiterStore, f).pipe(Effect.provide(layer), Effect.scoped)

describeRedis("RateLimiterStore/Redis", () => {
  afterAll(async () => {
    // the layer never closes a client it was given: it must still be usable here
    expect(await shared.ping()).toBe("PONG")
    shared.disconnect()
    await deleteKeys(prefix)
  })

  rateLimiterSuite("redis", suiteLayer)
  fractionalSlidingWindow("redis", suiteLayer)

  it("decides exactly as the memory store, call for call", () =>
    fc.assert(
      fc.asyncProperty(
        fc.record({
          algorithm: fc.constantFrom("tokenBucket" as const, "fixedWindow" as const, "slidingWindow" as const),
          limit: fc.integer({ min: 1, max: 10 }),
          // refill rates and windows with awkward fractions: 1000 / rate is rarely exact
          rate: fc.double({ min: 0.01, max: 5000, noNaN: true }),
          window: fc.integer({ min: 1, max: 5000 }),
          start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
          steps: fc.array(
            fc.record({
              delay: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3000 })),
              cost: fc.integer({ min: 1, max: 12 })
            }),
            { minLength: 1, maxLength: 30 }
          )
        }),
        ({ algorithm, limit, rate, start, steps, window }) =>
          Effect.runPromise(withStore(suiteLayer, (redis) =>
            Effect.gen(function*() {
              const memory = RateLimiterStore.unsafeMakeMemory()
              const name = fresh("diff")
              let now = start
              for (const { cost, delay } of steps) {
                now += delay
                const expected = algorithm === "tokenBucket"
                  ? memory.sync.tokenBucket("k", cost, { name, capacity: limit, refillPerSecond: rate }, now)
                  : memory.sync[algorithm]("k", cost, { name, limit, windowMillis: window }, now)
                const actual = algorithm === "tokenBucket"
                  ? yield* redis.tokenBucket("k", cost, { name, capacity: limit, refillPerSecond: rate }, now)
                  : yield* redis[algorithm]("k", cost, { name, limit, windowMillis: window }, now)
                expect(actual).toEqual(expected)
              }
            })))
      ),
      { numRuns: 200 }
    ))

  it.effect("an admitted request sets the key's PX to its natural ttl plus the margin; a denial writes nothing", () =>
    Effect.gen(function*() {
      const layer = RateLimiterStoreRedis.layer({ url: REDIS_URL, prefix }) // default margin: 1 s
      const name = fresh("pttl")
      yield* TestClock.adjust("250 millis")
      const started = Date.now()
      const [tb, fw, sw, denied] = yield* Effect.provide(
        Effect.gen(function*() {
          const bucket = yield* RateLimiter.tokenBucket({ capacity: 10, refillPerSecond: 2, name })
          yield* bucket.tryAcquire("k", 3) // full again 1.5 s from now
          const fixed = yield* RateLimiter.fixedWindow({ limit: 5, window: "10 seconds", name })
          yield* fixed.tryAcquire("k") // window ends 9.75 s from now
          const sliding = yield* RateLimiter.slidingWindow({ limit: 5, window: "10 seconds", name })
          yield* sliding.tryAcquire("k") // forgotten two windows after this window's start: 19.75 s
          const store = yield* RateLimiterStore.RateLimiterStore
          const denied = yield* store.tokenBucket("never", 11, { name, capacity: 10, refillPerSecond: 2 }, 250)
          return [bucket, fixed, sliding, denied] as const
        }).pipe(Effect.scoped),
        layer
      )
      expect(tb.limit).toBe(10)
      expect(fw.limit).toBe(5)
      expect(sw.limit).toBe(5)
      expect(denied.allowed).toBe(false)
      expect(denied.retryAfterMillis).toBe(Infinity)
      const pttl = yield* inspect((c) =>
        Promise.all([
          c.pttl(keyOf(prefix, "tb", name, "k")),
          c.pttl(keyOf(prefix, "fw", name, "k")),
          c.pttl(keyOf(prefix, "sw", name, "k")),
          c.exists(keyOf(prefix, "tb", name, "never"))
        ])
      )
      // Redis counts the PX down in real time: by as much as has passed since before the writes
      const passed = Date.now() - started + 1
      const within = (ttl: number, natural: number) => {
        expect(ttl).toBeGreaterThanOrEqual(natural + 1000 - passed)
        expect(ttl).toBeLessThanOrEqual(natural + 1000)
      }
      within(pttl[0], 1500)
      within(pttl[1], 9750)
      within(pttl[2], 19_750)
      expect(pttl[3]).toBe(0)
    }))

  it.live("an idle key disappears from Redis on its own", () =>
    Effect.gen(function*() {
      const name = fresh("idle")
      const key = keyOf(prefix, "tb", name, "k")
      const layer = RateLimiterStoreRedis.layer({ url: REDIS_URL, prefix, expiryMargin: 0 })
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => new Redis(REDIS_URL)),
        (c) => Effect.sync(() => c.disconnect())
      )
      yield* Effect.promise(() => client.ping()) // connected before the clock starts
      const started = Date.now()
      // the bucket is full again after 200 ms: the key's PX
      yield* withStore(
        layer,
        (store) => store.tokenBucket("k", 1, { name, capacity: 1, refillPerSecond: 5 }, Date.now())
      )
      const pttl = yield* Effect.promise(() => client.pttl(key))
      if (pttl === -2) {
        // gone already: only possible if the whole ttl passed (a busy machine)
        expect(Date.now() - started + 1).toBeGreaterThanOrEqual(200)
      } else {
        expect(pttl).toBeGreaterThan(0)
        expect(pttl).toBeLessThanOrEqual(200)
      }
      yield* eventually(Effect.map(Effect.promise(() => client.exists(key)), (n) => n === 0))
      expect(Date.now() - started + 1).toBeGreaterThanOrEqual(200)
    }).pipe(Effect.scoped))

  it.effect("keys are Cluster-safe: one hash tag per limiter and key, whatever characters they contain", () =>
    Effect.gen(function*() {
      expect(keyOf("rl:", "tb", "api", "user-42")).toBe("rl:tb:{api:user-42}")
      for (const [name, key] of [["api", "user-42"], ["a:b", "c"], ["a", "b:c"], ["{x}", "}{"], ["%3A", ":"]]) {
        const keys = (["tb", "fw", "sw"] as const).map((a) => keyOf(prefix, a, name!, key!))
        const tags = keys.map(hashTag)
        expect(new Set(tags).size).toBe(1) // the three algorithms' keys of one limiter key: one slot
        expect(keys[0]!.split("{")).toHaveLength(2) // braces in names are escaped: the tag is exactly ours
        expect(tags[0]!.split(":")).toHaveLength(2)
      }
      // escaping keeps ambiguous joins apart
      expect(keyOf("p:", "tb", "a:b", "c")).not.toBe(keyOf("p:", "tb", "a", "b:c"))
      expect(keyOf("p:", "tb", "%3A", "x")).not.toBe(keyOf("p:", "tb", ":", "x"))
      // and the store really uses those keys
      const name = fresh("{odd}:name")
      yield* withStore(
        suiteLayer,
        (store) => store.fixedWindow("k:{1}", 1, { name, limit: 1, windowMillis: 60_000 }, 0)
      )
      expect(yield* inspect((c) => c.exists(keyOf(prefix, "fw", name, "k:{1}")))).toBe(1)
      expect(() => RateLimiterStoreRedis.layer({ url: REDIS_URL, prefix: "{app}:" })).toThrow(/prefix/)
    }))

  it.effect("falls back to EVAL when the server lost its scripts (SCRIPT FLUSH)", () =>
    withStore(suiteLayer, (store) =>
      Effect.gen(function*() {
        const name = fresh("noscript")
        const params = { name, capacity: 2, refillPerSecond: 1 }
        expect((yield* store.tokenBucket("k", 1, params, 0)).remaining).toBe(1)
        yield* inspect((c) => c.script("FLUSH"))
        expect((yield* store.tokenBucket("k", 1, params, 0)).remaining).toBe(0)
        expect((yield* store.tokenBucket("k", 1, params, 0)).allowed).toBe(false)
      })))

  // Effect 4 passes a log's message as the array of what was logged: the first part is the text
  it.effect("one store effect run twice is two decisions; a copy of the store (no private path) decides the same", () =>
    withStore(suiteLayer, (store) =>
      Effect.gen(function*() {
        const params = { name: fresh("twice"), capacity: 2, refillPerSecond: 0.001 }
        const decide = store.tokenBucket("k", 1, params, 1_000)
        const runs = [yield* decide, yield* decide, yield* decide]
        expect(runs.map((d) => [d.allowed, d.remaining])).toEqual([[true, 1], [true, 0], [false, 0]])
        // the limiter takes the store's private path; over a copy of its methods it takes the public one
        const copy: RateLimiterStore.Store = { ...store }
        const decisions = (over: RateLimiterStore.Store, name: string) =>
          Effect.gen(function*() {
            const limiter = yield* RateLimiter.fixedWindow({ limit: 2, window: "1 hour", name })
            return [yield* limiter.tryAcquire("k"), yield* limiter.tryAcquire("k"), yield* limiter.tryAcquire("k")]
          }).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, over))
        const direct = yield* decisions(store, fresh("direct"))
        const copied = yield* decisions(copy, fresh("copied"))
        expect(copied).toEqual(direct)
        expect(direct.map((d) => d.allowed)).toEqual([true, true, false])
      })))

  it.effect("decisions sent in one tick leave in a few writes, each answered with its own reply", () =>
    Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const c = new Redis(REDIS_URL)
          await c.ping() // ready: the store writes straight to its socket
          return c
        }),
        (c) => Effect.sync(() => c.disconnect())
      )
      // every write the socket makes: `_write` for one chunk, `_writev` for the chunks a cork held
      const stream = client.stream as unknown as Record<"_write" | "_writev", (...args: Array<unknown>) => void>
      let writes = 0
      for (const method of ["_write", "_writev"] as const) {
        const original = stream[method]!.bind(stream)
        stream[method] = (...args) => {
          writes++
          original(...args)
        }
      }
      const name = fresh("burst")
      const decisions = yield* Effect.provide(
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 0.001, name })
          return yield* Effect.all(Array.from({ length: 64 }, () => limiter.tryAcquire("hot")), {
            concurrency: "unbounded"
          })
        }).pipe(Effect.scoped),
        RateLimiterStoreRedis.layer({ client, prefix, expiryMargin: "1 minute" })
      )
      // one call goes out at once, the other 63 at most 16 to a write
      expect(writes).toBeGreaterThanOrEqual(2)
      expect(writes).toBeLessThanOrEqual(1 + Math.ceil(63 / 16))
      // the script still ran once per call, atomically, and each call got its own reply
      const allowed = decisions.filter((d) => d.allowed)
      expect(allowed).toHaveLength(20)
      expect(allowed.map((d) => d.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i))
      expect(decisions.every((d) => d.outage === undefined)).toBe(true)
      // and the client is uncorked: a plain command still goes out and comes back
      expect(yield* Effect.promise(() => client.ping())).toBe("PONG")
    }).pipe(Effect.scoped))

  const logged = loggedMessages

  it.live("an outage denies by default, with retryAfterOnError, and logs a warning — promptly", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const messages: Array<string> = []
      const layer = RateLimiterStoreRedis.layer({ url: `redis://127.0.0.1:${port}`, timeout: "500 millis" })
      const started = Date.now()
      const decisions = yield* Effect.provide(
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1, name: fresh("down") })
          return [yield* limiter.tryAcquire("k"), yield* limiter.tryAcquire("k")]
        }).pipe(Effect.scoped),
        Layer.merge(layer, logged(messages))
      )
      // each call ends by its 500 ms timeout at the latest (a refused connection fails sooner); the cap
      // only catches a hang, not a slow machine
      expect(Date.now() - started).toBeLessThan(10_000)
      for (const d of decisions) {
        expect(d.allowed).toBe(false)
        expect(d.limit).toBe(5)
        expect(Duration.toMillis(d.retryAfter)).toBe(1000)
        expect(d.outage).toBe(true)
      }
      expect(messages.filter((m) => m.includes("denying"))).toHaveLength(1) // the second one is not logged again
    }))

  it.live("onError: \"allow\" fails open; a Redis that never answers times out instead of hanging", () =>
    Effect.gen(function*() {
      const hole = yield* blackHole
      const messages: Array<string> = []
      const layer = RateLimiterStoreRedis.layer({
        url: `redis://127.0.0.1:${hole.port}`,
        timeout: "300 millis",
        onError: "allow"
      })
      const started = Date.now()
      const decision = yield* Effect.provide(
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.fixedWindow({ limit: 1, window: "1 minute", name: fresh("hung") })
          return yield* limiter.tryAcquire("k")
        }).pipe(Effect.scoped),
        Layer.merge(layer, logged(messages))
      )
      // the call gave up after its timeout (a real timer, armed after `started`); the cap only catches a hang
      const elapsed = Date.now() - started + 1
      expect(elapsed).toBeGreaterThanOrEqual(300)
      expect(elapsed).toBeLessThan(10_000)
      expect(decision.allowed).toBe(true)
      expect(messages.some((m) => m.includes("allowing"))).toBe(true)
    }).pipe(Effect.scoped))

  it.live("behind the middleware, an unreachable Redis is a 503 that says so, not a quota exceeded", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(closedPort)
      const layer = RateLimiterStoreRedis.layer({ url: `redis://127.0.0.1:${port}`, retryAfterOnError: "2 seconds" })
      const response = yield* Effect.provide(
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.fixedWindow({ limit: 100, window: "10 seconds", name: fresh("http") })
          const middleware = RateLimitMiddleware.make({ limiter, scope: () => Effect.succeed("customer-7") })
          return yield* serveWeb(middleware, new Request("http://127.0.0.1/orders"))
        }).pipe(Effect.scoped),
        Layer.merge(layer, logged([]))
      )
      expect(response.status).toBe(503)
      expect(response.headers["retry-after"]).toBe("2")
      expect(response.headers["ratelimit"]).toBeUndefined()
      expect(response.headers["ratelimit-policy"]).toBeUndefined()
      expect(JSON.parse(response.body).type).toBe(RateLimitMiddleware.storeUnavailableType)
    }))

  it("rejects bad options when built", () => {
    expect(() => RateLimiterStoreRedis.layer({ url: REDIS_URL, onError: "maybe" as "allow" })).toThrow(/onError/)
    expect(() => RateLimiterStoreRedis.layer({ url: REDIS_URL, timeout: 0 })).toThrow(/timeout/)
    expect(() => RateLimiterStoreRedis.layer({ url: REDIS_URL, expiryMargin: -1 })).toThrow(/expiryMargin/)
  })
})
