/**
 * Shared backpressure in proportion to the evidence, and `Retry-After` over the `RateLimit` fields — over
 * in-memory servers under virtual time, so the times below are exact.
 */
import {
  callback,
  failureOf,
  fork,
  HttpClient,
  HttpClientRequest,
  HttpServerResponse,
  makeClock,
  memoryResponse,
  scoped,
  TestClock,
  withClock,
  yieldNow
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber } from "effect"
import {
  Backoff,
  Deadline,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware,
  ResilientHttpClient,
  Retry
} from "effect-resilience"
import { appClient, scriptedClient, type Step } from "./support/memoryHttp.js"

const url = "http://api.test/orders"

/** A deterministic stream of numbers in [0, 1) for the server's own dice (mulberry32). */
const dice = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

interface Exchange {
  readonly key: string
  readonly at: number
  readonly status: number
}

/**
 * Virtual time for the simulations below, event by event: `run` wakes the earliest sleepers, lets every fiber
 * that can run do so, and repeats until `effect` is done. `TestClock.adjust` per sleeper would cost most of a
 * minute for hundreds of requests.
 */
const virtualTime = () => {
  let now = 0
  const sleepers = new Set<{ readonly at: number; readonly wake: () => void }>()
  const clock = makeClock(() => now, (duration) =>
    callback<void>((resume) => {
      // woken through a yield: Effect 4 resumes the sleeper inside `wake`, which would run it on this stack
      const sleeper = { at: now + Duration.toMillis(duration), wake: () => resume(yieldNow) }
      if (sleeper.at <= now) return resume(Effect.void)
      sleepers.add(sleeper)
      return Effect.sync(() => void sleepers.delete(sleeper))
    }))
  /** Until nothing is left to run now: every fiber is waiting on a sleeper or done. */
  const settle = Effect.promise(async () => {
    for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setTimeout(() => setImmediate(resolve), 0))
  })
  const run = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      let done = false
      const fiber = yield* fork(effect.pipe(withClock(clock), Effect.ensuring(Effect.sync(() => (done = true)))))
      yield* settle
      while (!done) {
        const next = Math.min(...[...sleepers].map((s) => s.at))
        if (!Number.isFinite(next)) return yield* Effect.die(new Error("every fiber waits, and no sleeper is left"))
        now = next
        for (const s of [...sleepers].filter((s) => s.at <= now)) {
          sleepers.delete(s)
          s.wake()
        }
        yield* settle
      }
      return { exit: yield* Fiber.await(fiber), millis: now }
    })
  return { clock, run }
}

/**
 * A server that takes `latencyMillis` per request and refuses a share of them with `503 Retry-After: 1`,
 * recording every exchange.
 */
const lossyServer = (refused: () => boolean, latencyMillis: number) => {
  const exchanges: Array<Exchange> = []
  const client = HttpClient.make((request) =>
    Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      yield* Effect.sleep(latencyMillis)
      const status = refused() ? 503 : 201
      exchanges.push({ key: request.headers["idempotency-key"] ?? "", at, status })
      const headers: Record<string, string> = status === 503 ? { "retry-after": "1" } : {}
      return memoryResponse(request, status, { headers, body: "{}" })
    })
  )
  return { client, exchanges }
}

/** 300 orders from 20 callers, each under a 10 s deadline, over a server refusing 12 % of requests. */
const orders = (sharedBackpressure: boolean) =>
  Effect.gen(function*() {
    const roll = dice(42)
    const server = lossyServer(() => roll() < 0.12, 50)
    const http = yield* ResilientHttpClient.make({
      retry: { schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }), maxAttempts: 5 },
      sharedBackpressure
    }).pipe(Effect.provideService(HttpClient.HttpClient, server.client))
    // a new request value per order: one value is one logical request, with one key
    const order = Effect.suspend(() => http.execute(HttpClientRequest.post(url))).pipe(Effect.flatMap((r) => r.json))
    const caller = Effect.forEach(Array.from({ length: 15 }), () =>
      Effect.exit(order.pipe(Deadline.within("10 seconds"))))
    const callers = Effect.forEach(Array.from({ length: 20 }), () =>
      caller, { concurrency: 20 })
    const { exit, millis } = yield* virtualTime().run(callers)
    const outcomes = Exit.isSuccess(exit) ? exit.value.flat() : []
    return { millis, outcomes, exchanges: server.exchanges }
  })

describe("shared backpressure in proportion to the evidence", () => {
  scoped(
    "a mostly healthy origin is not paused: 12 % of 503s cost no more than 1.5x the time without sharing",
    () =>
      Effect.gen(function*() {
        const shared = yield* orders(true)
        const own = yield* orders(false)
        const failed = (run: typeof shared) => run.outcomes.filter(Exit.isFailure).length
        const refused = shared.exchanges.filter((e) => e.status === 503).length / shared.exchanges.length
        console.log(
          `300 orders, 20 callers, ${(100 * refused).toFixed(1)} % 503s: ${shared.millis} ms shared ` +
            `(${failed(shared)} failed), ${own.millis} ms not (${failed(own)} failed)`
        )
        expect(shared.outcomes).toHaveLength(300)
        expect(failed(shared)).toBe(0)
        expect(refused).toBeGreaterThan(0.08)
        expect(shared.millis).toBeLessThanOrEqual(1.5 * own.millis)
        // every retry of an order came after the Retry-After of its refusal
        const last = new Map<string, Exchange>()
        for (const e of [...shared.exchanges].sort((a, b) => a.at - b.at)) {
          const before = last.get(e.key)
          if (before?.status === 503) expect(e.at).toBeGreaterThanOrEqual(before.at + 50 + 1000)
          last.set(e.key, e)
        }
      }),
    60_000
  )

  scoped(
    "a server refusing everything still gets quiet: fewer requests than without sharing",
    () =>
      Effect.gen(function*() {
        const count = (sharedBackpressure: boolean) =>
          Effect.gen(function*() {
            const server = lossyServer(() => true, 10)
            const http = yield* ResilientHttpClient.make({ sharedBackpressure }).pipe(
              Effect.provideService(HttpClient.HttpClient, server.client)
            )
            // 20 callers calling for 10 s, each call in a loop until the time is up
            const caller = Effect.exit(http.execute(HttpClientRequest.get(url))).pipe(
              Effect.repeat({ while: () => Effect.map(Clock.currentTimeMillis, (now) => now < 10_000) })
            )
            yield* virtualTime().run(Effect.forEach(Array.from({ length: 20 }), () => caller, { concurrency: 20 }))
            return server.exchanges.length
          })
        const shared = yield* count(true)
        const own = yield* count(false)
        console.log(`refusing everything for 10 s, 20 callers: ${shared} requests shared, ${own} not shared`)
        expect(shared).toBeLessThan(own * 0.9)
      }),
    60_000
  )

  scoped(
    "one 503 with Retry-After: 5 does not fail an unrelated GET under a 2 s deadline",
    () =>
      Effect.gen(function*() {
        const steps: ReadonlyArray<Step> = [{ status: 503, headers: { "retry-after": "5" } }, 200]
        const { client, log } = yield* scriptedClient(steps)
        const http = yield* ResilientHttpClient.make({ idempotencyKeys: false }).pipe(
          Effect.provideService(HttpClient.HttpClient, client)
        )
        expect((yield* http.execute(HttpClientRequest.post(url))).status).toBe(503) // a POST without a key: returned
        const health = yield* Effect.exit(http.get("http://api.test/health").pipe(Deadline.within("2 seconds")))
        expect(Exit.map(health, (r) => r.status)).toEqual(Exit.succeed(200))
        expect(log).toHaveLength(2)
        expect(yield* Clock.currentTimeMillis).toBe(0)
      })
  )

  scoped(
    "a call that gives up on an origin's pause says so: OriginPaused, without sending",
    () =>
      Effect.gen(function*() {
        const { client, log } = yield* scriptedClient([{ status: 503, headers: { "retry-after": "30" } }])
        const http = yield* ResilientHttpClient.make({ retry: false }).pipe(
          Effect.provideService(HttpClient.HttpClient, client)
        )
        // three refusals in a row: the origin refuses everything, and asks for 30 s
        for (let i = 0; i < 3; i++) yield* http.get(url)
        const exit = yield* Effect.exit(http.get(url).pipe(Deadline.within("5 seconds")))
        const error = failureOf(exit) as ResilientHttpClient.OriginPaused
        expect(error).toBeInstanceOf(ResilientHttpClient.OriginPaused)
        expect(error.origin).toBe("http://api.test")
        expect(error.message).toMatch(/http:\/\/api\.test asked every caller to hold off/)
        expect(log).toHaveLength(3)
        expect(yield* Clock.currentTimeMillis).toBe(0)
      })
  )
})

describe("Retry-After wins over the RateLimit fields", () => {
  scoped(
    "a 429 with Retry-After: 1 and t=10 is retried after 1 s, within a 4 s deadline",
    () =>
      Effect.gen(function*() {
        const { client, log } = yield* scriptedClient([
          { status: 429, headers: { "retry-after": "1", ratelimit: "\"default\";r=0;t=10" } },
          200
        ])
        const http = yield* ResilientHttpClient.make().pipe(Effect.provideService(HttpClient.HttpClient, client))
        const call = yield* fork(Effect.exit(http.get(url).pipe(Deadline.within("4 seconds"))))
        yield* TestClock.adjust("1 second")
        expect(Exit.map(yield* Fiber.join(call), (r) => r.status)).toEqual(Exit.succeed(200))
        expect(log.map((s) => s.at)).toEqual([0, 1000])
      })
  )

  scoped(
    "after a token bucket's last token, the next call waits for the next token, not for a full bucket",
    () =>
      Effect.gen(function*() {
        // the real middleware: 20 tokens, 2 a second; its 20th 201 says r=0;t=1 (the next token in 0.5 s, rounded up)
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 2 })
        const app = Effect.succeed(HttpServerResponse.text("created", { status: 201 })).pipe(
          RateLimitMiddleware.make({ limiter, scope: () => Effect.succeed("alice") })
        )
        const base = yield* appClient(app)
        const sent: Array<number> = []
        const http = yield* ResilientHttpClient.make().pipe(
          Effect.provideService(
            HttpClient.HttpClient,
            HttpClient.tapRequest(base, () => Effect.map(Clock.currentTimeMillis, (at) => void sent.push(at)))
          )
        )
        let last = ""
        for (let i = 0; i < 20; i++) last = (yield* http.post(url)).headers["ratelimit"] ?? ""
        expect(last).toBe("\"default\";r=0;t=1")
        const next = yield* fork(http.post(url))
        yield* TestClock.adjust("1 second")
        expect((yield* Fiber.join(next)).status).toBe(201)
        // sent once the pause of t=1 s was over, not after the 10 s a full bucket takes
        expect(sent).toHaveLength(21)
        expect(sent.at(-1)).toBe(1000)
      }).pipe(Effect.provide(RateLimiterStore.layerMemory))
  )

  scoped("a 429 without Retry-After but with r=0 is retried after its t", () =>
    Effect.gen(function*() {
      const { client, log } = yield* scriptedClient([{ status: 429, headers: { ratelimit: "\"d\";r=0;t=2" } }, 200])
      const http = yield* ResilientHttpClient.make({
        retry: { schedule: Backoff.exponential({ base: "10 millis", cap: "10 millis" }) }
      }).pipe(Effect.provideService(HttpClient.HttpClient, client))
      const call = yield* fork(http.get(url))
      yield* TestClock.adjust("2 seconds")
      expect((yield* Fiber.join(call)).status).toBe(200)
      expect(log.map((s) => s.at)).toEqual([0, 2000])
    }))

  scoped("Retry-After beyond maxRetryAfter stops the retries with reason retry-after", () =>
    Effect.gen(function*() {
      const { client } = yield* scriptedClient([{ status: 503, headers: { "retry-after": "120" } }])
      const http = yield* ResilientHttpClient.make().pipe(Effect.provideService(HttpClient.HttpClient, client))
      const error = failureOf(yield* Effect.exit(http.get(url))) as Retry.RetriesExhausted<unknown>
      expect([error.attempts, error.reason]).toEqual([1, "retry-after"])
    }))
})
