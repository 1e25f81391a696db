/**
 * The resilient client over scripted in-memory servers under the TestClock: retries and their instants, keys,
 * transport errors, the headers, the attempt timeout around the body, and the order of its layers. The guards and
 * the lifetimes: ResilientHttpClient.policies.test.ts.
 */
import {
  editionFile,
  encodeFailure,
  failureOf,
  fork,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse,
  isDecodeError,
  scoped,
  TestClock,
  transportFailure
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Queue, Stream } from "effect"
import { Criticality, Deadline, HttpErrors, ResilientHttpClient, Retry } from "effect-resilience"
import { fast, scripted, statusOf } from "./support/memoryHttp.js"

const url = "http://api.test/orders"
describe("ResilientHttpClient", () => {
  scoped(
    "retries a retryable status for an idempotent method, at the schedule's instants",
    () =>
      Effect.gen(function*() {
        const { http, seen } = yield* scripted([503, 503, 200])
        const call = yield* fork(statusOf(http.execute(HttpClientRequest.get(url))))
        expect((yield* Queue.take(seen)).at).toBe(0)
        yield* TestClock.adjust("100 millis")
        expect((yield* Queue.take(seen)).at).toBe(100)
        yield* TestClock.adjust("200 millis")
        expect((yield* Queue.take(seen)).at).toBe(300)
        expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      })
  )

  scoped(
    "does not retry a POST without an idempotency key: the 503 is returned as it is",
    () =>
      Effect.gen(function*() {
        const { http, log } = yield* scripted([503, 200], { idempotencyKeys: false })
        expect(yield* statusOf(http.execute(HttpClientRequest.post(url)))).toEqual(Exit.succeed(503))
        expect(log).toHaveLength(1)
      })
  )

  scoped("sends one Idempotency-Key on every attempt of a POST, and retries it", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([502, 503, 200])
      const call = yield* fork(statusOf(http.execute(HttpClientRequest.post(url))))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      const keys = log.map((s) => s.headers["idempotency-key"])
      expect(keys).toHaveLength(3)
      expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(new Set(keys).size).toBe(1)
    }))

  scoped("a key supplied by the caller wins; GET gets none", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([200])
      yield* http.execute(HttpClientRequest.post(url).pipe(HttpClientRequest.setHeader("Idempotency-Key", "mine")))
      yield* http.execute(HttpClientRequest.get(url))
      expect(log.map((s) => s.headers["idempotency-key"])).toEqual(["mine", undefined])
    }))

  scoped("Retry-After on a 429 wins over the shorter backoff", () =>
    Effect.gen(function*() {
      const { http, log, seen } = yield* scripted([{ status: 429, headers: { "retry-after": "2" } }, 200])
      const call = yield* fork(statusOf(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1999 millis")
      expect(log).toHaveLength(1)
      yield* TestClock.adjust("1 millis")
      expect((yield* Queue.take(seen)).at).toBe(2000)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
    }))

  scoped("exhausted retries carry the last status error, its body still readable", () =>
    Effect.gen(function*() {
      const { http } = yield* scripted([{ status: 500, body: "down" }], { retry: { schedule: fast, maxAttempts: 2 } })
      const call = yield* fork(Effect.exit(http.execute(HttpClientRequest.get(url))))
      yield* TestClock.adjust("1 second")
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.StatusError>
      expect(error).toBeInstanceOf(Retry.RetriesExhausted)
      expect(error.attempts).toBe(2)
      expect(error.last).toBeInstanceOf(HttpErrors.StatusError)
      expect(error.last.status).toBe(500)
      expect(yield* error.last.response.text).toBe("down")
    }))

  scoped("retry: false returns every answer as it is", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([503], { retry: false })
      expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(503))
      expect(log).toHaveLength(1)
    }))

  scoped(
    "a read timeout is an unknown outcome: retried for GET, not for a POST without a key",
    () =>
      Effect.gen(function*() {
        const { http, log, seen } = yield* scripted(["hang", 200, "hang"], {
          attemptTimeout: "1 second",
          idempotencyKeys: false
        })
        const get = yield* fork(statusOf(http.execute(HttpClientRequest.get(url))))
        yield* Queue.take(seen)
        yield* TestClock.adjust("1100 millis")
        yield* Queue.take(seen)
        expect(yield* Fiber.join(get)).toEqual(Exit.succeed(200))

        const post = yield* fork(Effect.exit(http.execute(HttpClientRequest.post(url))))
        yield* Queue.take(seen)
        yield* TestClock.adjust("1 second")
        const error = failureOf(yield* Fiber.join(post)) as HttpErrors.NoResponse
        expect(error).toBeInstanceOf(HttpErrors.NoResponse)
        expect(error.reason).toBe("read-timeout")
        yield* TestClock.adjust("1 minute")
        expect(log).toHaveLength(3)
      })
  )

  scoped("a connection refused never left: even a POST without a key is retried", () =>
    Effect.gen(function*() {
      const { http } = yield* scripted(["refused"], { idempotencyKeys: false })
      const call = yield* fork(Effect.exit(http.execute(HttpClientRequest.post(url))))
      yield* TestClock.adjust("1 second")
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.ConnectFailed>
      expect(error.attempts).toBe(3)
      expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect(error.last.reason).toBe("refused")
    }))

  scoped(
    "a reset after sending is retried only when safe; unretried, it is a typed NoResponse",
    () =>
      Effect.gen(function*() {
        const { http } = yield* scripted(["reset"], { idempotencyKeys: false })
        const error = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.post(url)))) as HttpErrors.NoResponse
        expect(error).toBeInstanceOf(HttpErrors.NoResponse)
        expect(error.reason).toBe("reset")
      })
  )

  it("the order of the layers is one pipe, and docs/http-client.md and the module JSDoc show that pipe", () => {
    /** The combinators of the first `base.pipe(...)` in `text`, in order. */
    const layers = (text: string) => {
      const lines = text.slice(text.indexOf("base.pipe(")).split("\n").slice(1)
      return lines.slice(0, lines.findIndex((line) => line.trim() === ")"))
        .map((line) => /^(?:guardedBy\(\w+, )?(?:layers\.)?(\w+)/.exec(line.replace(/\/\/.*$/, "").trim())?.[1])
    }
    const code = layers(editionFile("src/internal/http/resilientHttpClient/make.ts"))
    const docs = editionFile("../../docs/http-client.md")
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
    const jsdoc = editionFile("src/ResilientHttpClient.ts")
    const header = jsdoc.slice(jsdoc.indexOf("From the transport out"), jsdoc.indexOf("*/"))
    expect([...header.matchAll(/\{@link (\w+)\}/g)].map((m) => m[1])).toEqual(code)
  })

  it("classifies undici's errors (a transport failure, its code perhaps in a cause) by what is known", () => {
    const request = HttpClientRequest.get("http://127.0.0.1/")
    const nested = transportFailure(
      request,
      "",
      new Error("fetch failed", { cause: Object.assign(new Error("x"), { code: "ENOTFOUND" }) })
    )
    expect(ResilientHttpClient.classifyTransportError(transportFailure(request, "UND_ERR_CONNECT_TIMEOUT")))
      .toMatchObject({ _tag: "ConnectFailed", reason: "timeout", request })
    expect(ResilientHttpClient.classifyTransportError(nested)).toMatchObject({ _tag: "ConnectFailed", reason: "dns" })
    expect(ResilientHttpClient.classifyTransportError(transportFailure(request, "ECONNRESET"))).toMatchObject({
      _tag: "NoResponse",
      reason: "reset"
    })
    const encode = encodeFailure(request)
    expect(ResilientHttpClient.classifyTransportError(encode)).toBe(encode)
  })

  scoped(
    "each attempt sends what is left of its time as it goes: min(attempt timeout, deadline)",
    () =>
      Effect.gen(function*() {
        const { http, log } = yield* scripted([503, 200], { attemptTimeout: "5 seconds" })
        yield* http.execute(HttpClientRequest.get(url)).pipe(
          fork,
          Effect.tap(() => TestClock.adjust("1 second"))
        )
        const call = yield* fork(http.execute(HttpClientRequest.get(url)).pipe(Deadline.within("1500 millis")))
        yield* Fiber.join(call)
        const sent = log.map((s) => [s.at, s.headers["request-timeout-ms"]])
        // the retry after 100 ms still has 5 s of attempt; the call under a deadline has what is left of it
        expect(sent).toEqual([[0, "5000"], [100, "5000"], [1000, "1500"]])
      })
  )

  scoped("every attempt carries the fiber's criticality", () =>
    Effect.gen(function*() {
      const { http, log } = yield* scripted([200])
      yield* http.execute(HttpClientRequest.get(url))
      yield* http.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("sheddable"))
      const { http: off, log: offLog } = yield* scripted([200], { criticalityHeader: false })
      yield* off.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("critical"))
      const sent = [...log, ...offLog].map((s) => s.headers["request-criticality"])
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

    scoped(
      "a body that stalls fails with the client's decode error, whose cause is a read-timeout NoResponse",
      () =>
        Effect.gen(function*() {
          const http = yield* ResilientHttpClient.make({ attemptTimeout: "1 second" }).pipe(
            Effect.provideService(HttpClient.HttpClient, stalling("{\"id\":"))
          )
          const response = yield* http.get(url)
          const read = yield* fork(Effect.flip(response.json))
          yield* TestClock.adjust("1 second")
          const error = yield* Fiber.join(read)
          expect(isDecodeError(error)).toBe(true)
          expect(error.cause).toBeInstanceOf(HttpErrors.NoResponse)
          expect((error.cause as HttpErrors.NoResponse).reason).toBe("read-timeout")
          // the stream of the body is bounded the same way
          const streamed = yield* fork(Effect.flip(Stream.runDrain((yield* http.get(url)).stream)))
          yield* TestClock.adjust("1 second")
          expect(((yield* Fiber.join(streamed)) as { cause?: unknown }).cause).toBeInstanceOf(HttpErrors.NoResponse)
        })
    )

    scoped(
      "a body read after the attempt's end has a whole timeout of its own: a body already there is read",
      () =>
        Effect.gen(function*() {
          const { http } = yield* scripted([{ status: 200, body: "late but here" }], { attemptTimeout: "1 second" })
          const response = yield* http.get(url)
          yield* TestClock.adjust("5 seconds")
          expect(yield* response.text).toBe("late but here")
        })
    )
  })
})
