import { HttpClient, HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Duration, Effect, Exit, Fiber, Layer, Option, Queue, Random, Stream, TestClock } from "effect"
import { readFileSync } from "node:fs"
import * as Chaos from "../src/Chaos.js"
import {
  AdaptiveThrottle,
  Backoff,
  CircuitBreaker,
  Criticality,
  Deadline,
  HttpErrors,
  RateLimiter,
  RateLimiterStore,
  ResilientHttpClient,
  Retry,
  RetryBudget
} from "../src/index.js"
import { connectMillis } from "../src/internal/http/resilientHttpClient/node.js"
import * as ResilientHttpClientNode from "../src/ResilientHttpClient/Node.js"
import { scriptedClient, type Seen, type Step } from "./support/memoryHttp.js"

const url = "http://api.test/orders"
const fast = Backoff.exponential({ base: "100 millis", cap: "1 second" })

/** The preset over a scripted in-memory server. */
const scripted = (script: ReadonlyArray<Step>, options: ResilientHttpClient.Options = {}) =>
  Effect.gen(function*() {
    const { client, seen } = yield* scriptedClient(script)
    const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options }).pipe(
      Effect.provideService(HttpClient.HttpClient, client)
    )
    return { http, seen, base: client }
  })

/** The typed failure of an exit, if any. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const statusOf = (effect: Effect.Effect<{ readonly status: number }, unknown>) =>
  Effect.map(Effect.exit(effect), Exit.map((r) => r.status))

const all = (seen: Queue.Queue<Seen>) => Effect.map(Queue.takeAll(seen), Chunk.toReadonlyArray)

describe("ResilientHttpClient", () => {
  it.scoped("retries a retryable status for an idempotent method, at the schedule's instants", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([503, 503, 200])
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      expect((yield* Queue.take(seen)).at).toBe(0)
      yield* TestClock.adjust("100 millis")
      expect((yield* Queue.take(seen)).at).toBe(100)
      yield* TestClock.adjust("200 millis")
      expect((yield* Queue.take(seen)).at).toBe(300)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
    }))

  it.scoped("does not retry a POST without an idempotency key: the 503 is returned as it is", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([503, 200], { idempotencyKeys: false })
      expect(yield* statusOf(http.execute(HttpClientRequest.post(url)))).toEqual(Exit.succeed(503))
      expect(yield* Queue.size(seen)).toBe(1)
    }))

  it.scoped("sends one Idempotency-Key on every attempt of a POST, and retries it", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([502, 503, 200])
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.post(url))))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      const keys = (yield* all(seen)).map((s) => s.headers["idempotency-key"])
      expect(keys).toHaveLength(3)
      expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(new Set(keys).size).toBe(1)
    }))

  it.scoped("a key supplied by the caller wins; GET gets none", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([200])
      yield* http.execute(HttpClientRequest.post(url).pipe(HttpClientRequest.setHeader("Idempotency-Key", "mine")))
      yield* http.execute(HttpClientRequest.get(url))
      expect((yield* all(seen)).map((s) => s.headers["idempotency-key"])).toEqual(["mine", undefined])
    }))

  it.scoped("Retry-After on a 429 wins over the shorter backoff", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([{ status: 429, headers: { "retry-after": "2" } }, 200])
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1999 millis")
      expect(yield* Queue.size(seen)).toBe(0)
      yield* TestClock.adjust("1 millis")
      expect((yield* Queue.take(seen)).at).toBe(2000)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
    }))

  it.scoped("exhausted retries carry the last status error, its body still readable", () =>
    Effect.gen(function*() {
      const { http } = yield* scripted([{ status: 500, body: "down" }], { retry: { schedule: fast, maxAttempts: 2 } })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.get(url))))
      yield* TestClock.adjust("1 second")
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.StatusError>
      expect(error).toBeInstanceOf(Retry.RetriesExhausted)
      expect(error.attempts).toBe(2)
      expect(error.last.status).toBe(500)
      expect(yield* error.last.response.text).toBe("down")
    }))

  it.scoped("retry: false returns every answer as it is", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([503], { retry: false })
      expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(503))
      expect(yield* Queue.size(seen)).toBe(1)
    }))

  it.scoped("a read timeout is an unknown outcome: retried for GET, not for a POST without a key", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted(["hang", 200, "hang"], {
        attemptTimeout: "1 second",
        idempotencyKeys: false
      })
      const get = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1100 millis")
      yield* Queue.take(seen)
      expect(yield* Fiber.join(get)).toEqual(Exit.succeed(200))

      const post = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.post(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1 second")
      const error = failureOf(yield* Fiber.join(post)) as HttpErrors.NoResponse
      expect(error).toBeInstanceOf(HttpErrors.NoResponse)
      expect(error.reason).toBe("read-timeout")
      yield* TestClock.adjust("1 minute")
      expect(yield* Queue.size(seen)).toBe(0)
    }))

  it.scoped("a connection refused never left: even a POST without a key is retried", () =>
    Effect.gen(function*() {
      const { http } = yield* scripted(["refused"], { idempotencyKeys: false })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.post(url))))
      yield* TestClock.adjust("1 second")
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.ConnectFailed>
      expect(error.attempts).toBe(3)
      expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect(error.last.reason).toBe("refused")
    }))

  it.scoped("a reset after sending is retried only when safe; unretried, it is a typed NoResponse", () =>
    Effect.gen(function*() {
      const { http } = yield* scripted(["reset"], { idempotencyKeys: false })
      const error = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.post(url)))) as HttpErrors.NoResponse
      expect(error).toBeInstanceOf(HttpErrors.NoResponse)
      expect(error.reason).toBe("reset")
    }))

  it("rejects invalid options when called, not when run", () => {
    const invalid = [
      { attemptTimeout: -1 },
      { retry: { maxAttempts: 0 } },
      { retry: { budget: { maxTokens: 0, tokenRatio: 0.1 } } },
      { breaker: { trip: CircuitBreaker.consecutive(1), openFor: -1 } },
      { rateLimiter: {} },
      { idempotencyKeys: { methods: "POST" } },
      { idempotencyKeys: { header: "" } },
      { deadlineHeader: "" },
      { sharedBackpressure: { threshold: 2 } },
      { sharedBackpressure: { maxPause: "soon" } }
    ] as unknown as ReadonlyArray<ResilientHttpClient.Options>
    for (const options of invalid) {
      expect(() => ResilientHttpClient.make(options), JSON.stringify(options)).toThrow(Cause.IllegalArgumentException)
      expect(() => ResilientHttpClient.layer(options)).toThrow(Cause.IllegalArgumentException)
      expect(() => ResilientHttpClientNode.layer(options)).toThrow(Cause.IllegalArgumentException)
    }
    // the connect timeout is the Node transport's: given to `make`, which has no transport of its own, it is loud
    const connect = { connectTimeout: "1 second" } as ResilientHttpClient.Options
    expect(() => ResilientHttpClient.make(connect)).toThrow(/Node transport/)
    // 0 would be undici's "no timeout": refused, like a negative or unreadable one (Duration.infinity means none)
    for (const bad of [{ connectTimeout: "soon" }, { connectTimeout: -1 }, { connectTimeout: 0 }]) {
      expect(() => ResilientHttpClientNode.layer(bad as never), JSON.stringify(bad)).toThrow(/connectTimeout/)
    }
  })

  it("connectTimeout to undici's milliseconds: an infinite one is undici's none (0), a tiny one never 0", () => {
    expect(connectMillis(undefined)).toBe(3000)
    expect(connectMillis("250 millis")).toBe(250)
    expect(connectMillis(0.2)).toBe(1) // never rounded down to 0, undici's "none"
    expect(connectMillis(Duration.infinity)).toBe(0)
    expect(connectMillis(Duration.days(30))).toBe(30 * 86_400_000)
  })

  it("the order of the layers is one pipe, and docs/http-client.md and the module JSDoc show that pipe", () => {
    const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8")
    /** The combinators of the first `base.pipe(...)` in `text`, in order. */
    const layers = (text: string) => {
      const lines = text.slice(text.indexOf("base.pipe(")).split("\n").slice(1)
      return lines.slice(0, lines.findIndex((line) => line.trim() === ")"))
        .map((line) => /^(?:guardedBy\(\w+, )?(?:layers\.)?(\w+)/.exec(line.replace(/\/\/.*$/, "").trim())?.[1])
    }
    const code = layers(read("../src/internal/http/resilientHttpClient/make.ts"))
    const docs = read("../../../docs/http-client.md")
    const shown = layers(docs.slice(docs.indexOf("## How a request flows")))
    expect(code).toEqual([
      "classifyTransportErrors",
      "deadlineHeader",
      "criticalityHeader",
      "attemptTimeout",
      "circuitBreaker",
      "adaptiveThrottle",
      "rateLimiter",
      "sharedBackpressure",
      "retry",
      "idempotencyKeys"
    ])
    expect(shown).toEqual(code)
    // the module's JSDoc lists the same combinators in the same order
    const jsdoc = read("../src/ResilientHttpClient.ts")
    const header = jsdoc.slice(jsdoc.indexOf("From the transport out"), jsdoc.indexOf("*/"))
    expect([...header.matchAll(/\{@link (\w+)\}/g)].map((m) => m[1])).toEqual(code)
  })

  it("classifies undici's errors by what is known about the request", () => {
    const request = HttpClientRequest.get("http://127.0.0.1/")
    const transport = (code: string) =>
      new HttpClientError.RequestError({
        request,
        reason: "Transport",
        cause: Object.assign(new Error(code), { code })
      })
    const nested = new HttpClientError.RequestError({
      request,
      reason: "Transport",
      cause: new Error("fetch failed", { cause: Object.assign(new Error("x"), { code: "ENOTFOUND" }) })
    })
    expect(ResilientHttpClient.classifyTransportError(transport("UND_ERR_CONNECT_TIMEOUT"))).toMatchObject({
      _tag: "ConnectFailed",
      reason: "timeout"
    })
    expect(ResilientHttpClient.classifyTransportError(nested)).toMatchObject({ _tag: "ConnectFailed", reason: "dns" })
    expect(ResilientHttpClient.classifyTransportError(transport("ECONNRESET"))).toMatchObject({
      _tag: "NoResponse",
      reason: "reset"
    })
    const encode = new HttpClientError.RequestError({ request, reason: "Encode", cause: "x" })
    expect(ResilientHttpClient.classifyTransportError(encode)).toBe(encode)
  })

  it.scoped("each attempt sends what is left of its time as it goes: min(attempt timeout, deadline)", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([503, 200], { attemptTimeout: "5 seconds" })
      yield* http.execute(HttpClientRequest.get(url)).pipe(Effect.fork, Effect.zipLeft(TestClock.adjust("1 second")))
      const call = yield* Effect.fork(http.execute(HttpClientRequest.get(url)).pipe(Deadline.within("1500 millis")))
      yield* Fiber.join(call)
      const sent = (yield* all(seen)).map((s) => [s.at, s.headers["request-timeout-ms"]])
      // the retry after 100 ms still has 5 s of attempt; the call under a deadline has what is left of it
      expect(sent).toEqual([[0, "5000"], [100, "5000"], [1000, "1500"]])
    }))

  it.scoped("every attempt carries the fiber's criticality", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([200])
      yield* http.execute(HttpClientRequest.get(url))
      yield* http.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("sheddable"))
      const { http: off, seen: offSeen } = yield* scripted([200], { criticalityHeader: false })
      yield* off.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("critical"))
      const sent = [...yield* all(seen), ...yield* all(offSeen)].map((s) => s.headers["request-criticality"])
      expect(sent).toEqual(["default", "sheddable", undefined])
    }))

  describe("the body is read within the attempt timeout", () => {
    /** A client whose 200 sends `first` and then nothing, ever. */
    const stalling = (first: string) =>
      HttpClient.make((request) =>
        Effect.succeed(HttpClientResponse.fromWeb(
          request,
          new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode(first)) }), {
            status: 200
          })
        ))
      )

    it.scoped("a body that stalls fails with a ResponseError whose cause is a read-timeout NoResponse", () =>
      Effect.gen(function*() {
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "1 second" }).pipe(
          Effect.provideService(HttpClient.HttpClient, stalling("{\"id\":"))
        )
        const response = yield* http.get(url)
        const read = yield* Effect.fork(Effect.flip(response.json))
        yield* TestClock.adjust("1 second")
        const error = yield* Fiber.join(read)
        expect(error._tag).toBe("ResponseError")
        expect(error.cause).toBeInstanceOf(HttpErrors.NoResponse)
        expect((error.cause as HttpErrors.NoResponse).reason).toBe("read-timeout")
        // the stream of the body is bounded the same way
        const streamed = yield* Effect.fork(Effect.flip(Stream.runDrain((yield* http.get(url)).stream)))
        yield* TestClock.adjust("1 second")
        expect(((yield* Fiber.join(streamed)) as { cause?: unknown }).cause).toBeInstanceOf(HttpErrors.NoResponse)
      }))

    it.scoped("a body read after the attempt's end has a whole timeout of its own: a body already there is read", () =>
      Effect.gen(function*() {
        const { http } = yield* scripted([{ status: 200, body: "late but here" }], { attemptTimeout: "1 second" })
        const response = yield* http.get(url)
        yield* TestClock.adjust("5 seconds")
        expect(yield* response.text).toBe("late but here")
      }))
  })

  describe("circuit breaker", () => {
    it.scoped("a breaker per origin opens after failures and fails fast", () =>
      Effect.gen(function*() {
        const { http, seen } = yield* scripted([500], {
          retry: false,
          breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" }
        })
        yield* http.execute(HttpClientRequest.get(url))
        yield* http.execute(HttpClientRequest.get(url))
        const third = yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
        expect(failureOf(third)).toBeInstanceOf(CircuitBreaker.CircuitOpen)
        expect(yield* Queue.size(seen)).toBe(2)
      }))

    it.scoped("429 answers do not open the breaker: a throttling server is not down", () =>
      Effect.gen(function*() {
        const { http, seen } = yield* scripted([{ status: 429, headers: { "retry-after": "1" } }], {
          retry: false,
          breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" },
          sharedBackpressure: false // each call is sent at once (four refusals in a row would pause the origin)
        })
        for (let i = 0; i < 4; i++) {
          expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(429))
        }
        expect(yield* Queue.size(seen)).toBe(4)
      }))

    it.scoped("a breaker opened by a 503 stays open for its Retry-After when that is longer than openFor", () =>
      Effect.gen(function*() {
        const { http, seen } = yield* scripted([{ status: 503, headers: { "retry-after": "5" } }, 200], {
          retry: false,
          breaker: { trip: CircuitBreaker.consecutive(1), openFor: "1 second" }
        })
        yield* http.execute(HttpClientRequest.get(url))
        yield* TestClock.adjust("4 seconds")
        expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          CircuitBreaker.CircuitOpen
        )
        yield* TestClock.adjust("1 second")
        expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
        expect((yield* all(seen)).length).toBe(2)
      }))

    it.scoped("the client's breakers are the user's to read and control", () =>
      Effect.gen(function*() {
        const { http, seen } = yield* scripted([200], {
          breaker: { trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }
        })
        yield* http.execute(HttpClientRequest.get(url))
        const breakers = Option.getOrThrow(http.breakers)
        expect(yield* breakers.keys).toEqual(["http://api.test"])
        const breaker = yield* breakers.get("http://api.test")
        yield* breaker.isolate
        expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          CircuitBreaker.CircuitOpen
        )
        yield* breaker.reset
        expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
        expect(yield* Queue.size(seen)).toBe(2)
        const { http: none } = yield* scripted([200])
        expect(Option.isNone(none.breakers)).toBe(true)
      }))

    it.scoped("a ready keyed breaker is shared: what one client sees opens it for the other", () =>
      Effect.gen(function*() {
        const breakers = yield* CircuitBreaker.keyed<string>({
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 minute"
        })
        const one = yield* scripted([503], { retry: false, breaker: breakers })
        const other = yield* scripted([200], { retry: false, breaker: breakers })
        yield* one.http.execute(HttpClientRequest.get(url))
        yield* one.http.execute(HttpClientRequest.get(url))
        // a breaker built with its own options still counts the 503 answers, and the answer is returned as it is
        expect(failureOf(yield* Effect.exit(other.http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          CircuitBreaker.CircuitOpen
        )
        expect(yield* Queue.size(other.seen)).toBe(0)
        expect(Option.getOrThrow(other.http.breakers)).toBe(breakers)
      }))
  })

  it.scoped("with throttle, a server refusing everything gets fewer requests than the calls, and the rest fail locally", () =>
    Effect.gen(function*() {
      const { http, seen } = yield* scripted([503], { retry: false, throttle: true })
      let local = 0
      for (let i = 0; i < 40; i++) {
        const failure = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))
        if (failure instanceof AdaptiveThrottle.LocallyRejected) local++
      }
      expect(local).toBeGreaterThan(20)
      expect((yield* all(seen)).length + local).toBe(40)
      // the throttle draws from Random: a fixed seed, so the bound is met or missed for good
    }).pipe(Effect.withRandom(Random.make("throttle"))))

  it.scoped("a client-side limiter paces attempts per origin", () =>
    Effect.gen(function*() {
      const rateLimiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const { http, seen } = yield* scripted([200], { rateLimiter })
      yield* http.execute(HttpClientRequest.get(url))
      const second = yield* Effect.fork(http.execute(HttpClientRequest.get(url)))
      expect((yield* Queue.take(seen)).at).toBe(0)
      yield* TestClock.adjust("1 second")
      expect((yield* Queue.take(seen)).at).toBe(1000)
      yield* Fiber.join(second)
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))

  it.scoped("with Chaos losing responses, a keyed POST is retried and keeps its key", () =>
    Effect.gen(function*() {
      const { client, seen } = yield* scriptedClient([200])
      const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 10 } }).pipe(
        Effect.provideService(HttpClient.HttpClient, Chaos.client({ lostResponse: { probability: 0.5 } })(client))
      )
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.post(url))))
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      const attempts = yield* all(seen)
      expect(attempts.length).toBeGreaterThan(1)
      expect(new Set(attempts.map((s) => s.headers["idempotency-key"])).size).toBe(1)
    }).pipe(Effect.withRandom(Random.fixed([0.1, 0.9]))))

  describe("one lifetime: a client's state is made when the client is built", () => {
    it.scoped("one layer value provided twice builds two clients, each with its own budget and breakers", () =>
      Effect.gen(function*() {
        const { client, seen } = yield* scriptedClient([503])
        const live = ResilientHttpClient.layer({
          retry: { schedule: fast, maxAttempts: 5, budget: { maxTokens: 4, tokenRatio: 0.1 } },
          breaker: { trip: CircuitBreaker.consecutive(3), openFor: "1 minute" }
        }).pipe(Layer.provide(Layer.succeed(HttpClient.HttpClient, client)))
        const once = Effect.flatMap(
          ResilientHttpClient.ResilientHttpClient,
          (http) => Effect.exit(http.execute(HttpClientRequest.get(url)))
        ).pipe(Effect.provide(live))
        for (let run = 0; run < 2; run++) {
          const call = yield* Effect.fork(once)
          yield* TestClock.adjust("10 seconds")
          const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<unknown>
          // a fresh budget (maxTokens 4) allows one retry, every time: the second run does not inherit the first's
          expect([error.attempts, error.reason]).toEqual([2, "budget"])
        }
        expect((yield* all(seen)).length).toBe(4)
      }))

    it.scoped("a ready budget is shared by whoever holds it", () =>
      Effect.gen(function*() {
        const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.1 })
        const one = yield* scripted([503], { retry: { schedule: fast, maxAttempts: 5, budget } })
        const other = yield* scripted([503], { retry: { schedule: fast, maxAttempts: 5, budget } })
        const first = yield* Effect.fork(Effect.exit(one.http.execute(HttpClientRequest.get(url))))
        yield* TestClock.adjust("10 seconds")
        expect((failureOf(yield* Fiber.join(first)) as Retry.RetriesExhausted<unknown>).attempts).toBe(2)
        const second = failureOf(yield* Effect.exit(other.http.execute(HttpClientRequest.get(url))))
        expect([
          (second as Retry.RetriesExhausted<unknown>).attempts,
          (second as Retry.RetriesExhausted<unknown>).reason
        ])
          .toEqual([1, "budget"])
      }))
  })
})
