import {
  HttpClient,
  HttpClientError,
  HttpClientRequest,
  HttpRouter,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpClient, NodeHttpServer, Undici } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Duration, Effect, Exit, Fiber, Layer, Option, Queue, Random, Schedule, TestClock } from "effect"
import { spawn } from "node:child_process"
import { createServer } from "node:http"
import { connect, createServer as createNetServer } from "node:net"
import * as ResilientHttpClientNode from "../src/http/ResilientHttpClient/Node.js"
import {
  AdaptiveThrottle,
  Backoff,
  Chaos,
  CircuitBreaker,
  Criticality,
  Deadline,
  DeadlineMiddleware,
  HttpErrors,
  RateLimiter,
  RateLimiterStore,
  ResilientHttpClient,
  Retry
} from "../src/index.js"
import { serve, ServerAndClient } from "./support/httpServer.js"

interface Seen {
  readonly method: string
  readonly key: string | undefined
  readonly deadline: string | undefined
  readonly criticality: string | undefined
  readonly at: number
}

/**
 * A server whose answers are scripted: each request takes the next behaviour from `script` (the last one
 * repeats), and is recorded in `seen` (a queue, so a test can wait for the n-th request).
 */
type Step =
  | "ok"
  | "hang"
  | number
  | readonly [status: number, retryAfter: string]
  | { readonly status: number; readonly headers: Record<string, string> }

const scripted = (script: ReadonlyArray<Step>) =>
  Effect.gen(function*() {
    const seen = yield* Queue.unbounded<Seen>()
    let n = 0
    const handler = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const at = yield* TestClock.currentTimeMillis
      yield* Queue.offer(seen, {
        method: request.method,
        key: request.headers["idempotency-key"],
        deadline: request.headers["request-timeout-ms"],
        criticality: request.headers["request-criticality"],
        at
      })
      const step = script[Math.min(n++, script.length - 1)]!
      if (step === "ok") return HttpServerResponse.text("ok")
      if (step === "hang") return yield* Effect.never
      if (typeof step === "number") return HttpServerResponse.text(`status ${step}`, { status: step })
      if (!Array.isArray(step)) {
        const { headers, status } = step as { readonly status: number; readonly headers: Record<string, string> }
        return HttpServerResponse.text(`status ${status}`, { status, headers })
      }
      return HttpServerResponse.text(`status ${step[0]}`, { status: step[0], headers: { "retry-after": step[1] } })
    })
    yield* serve(HttpRouter.empty.pipe(HttpRouter.all("*", handler)))
    const address = yield* HttpServer.HttpServer
    const port = address.address._tag === "TcpAddress" ? address.address.port : 0
    return { seen, url: `http://127.0.0.1:${port}/orders` }
  })

const fast = Backoff.exponential({ base: "100 millis", cap: "1 second" })

const client = (options: ResilientHttpClient.Options = {}) =>
  ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options })

/** The typed failure of an exit, if any. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const statusOf = (effect: Effect.Effect<{ readonly status: number }, unknown>) =>
  Effect.map(Effect.exit(effect), Exit.map((r) => r.status))

describe("ResilientHttpClient", () => {
  it.scoped("retries a retryable status for an idempotent method, at the schedule's instants", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([503, 503, "ok"])
      const http = yield* client()
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      expect((yield* Queue.take(seen)).at).toBe(0)
      yield* TestClock.adjust("100 millis")
      expect((yield* Queue.take(seen)).at).toBe(100)
      yield* TestClock.adjust("200 millis")
      expect((yield* Queue.take(seen)).at).toBe(300)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("does not retry a POST without an idempotency key: the 503 is returned as it is", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([503, "ok"])
      const http = yield* client({ idempotencyKeys: false })
      const status = yield* statusOf(http.execute(HttpClientRequest.post(url)))
      expect(status).toEqual(Exit.succeed(503))
      expect(yield* Queue.size(seen)).toBe(1)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("sends one Idempotency-Key on every attempt of a POST, and retries it", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([502, 503, "ok"])
      const http = yield* client()
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.post(url))))
      const first = yield* Queue.take(seen)
      yield* TestClock.adjust("100 millis")
      const second = yield* Queue.take(seen)
      yield* TestClock.adjust("200 millis")
      const third = yield* Queue.take(seen)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      expect(first.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(second.key).toBe(first.key)
      expect(third.key).toBe(first.key)
      // a second logical request gets a key of its own
      const other = yield* Effect.fork(http.execute(HttpClientRequest.post(url)))
      expect((yield* Queue.take(seen)).key).not.toBe(first.key)
      yield* Fiber.join(other)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("a key supplied by the caller wins; GET gets none", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted(["ok"])
      const http = yield* client()
      yield* http.execute(HttpClientRequest.post(url).pipe(HttpClientRequest.setHeader("Idempotency-Key", "mine")))
      expect((yield* Queue.take(seen)).key).toBe("mine")
      yield* http.execute(HttpClientRequest.get(url))
      expect((yield* Queue.take(seen)).key).toBeUndefined()
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("Retry-After on a 429 wins over the shorter backoff", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([[429, "2"], "ok"])
      const http = yield* client()
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1999 millis")
      expect(yield* Queue.size(seen)).toBe(0)
      yield* TestClock.adjust("1 millis")
      expect((yield* Queue.take(seen)).at).toBe(2000)
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("retry.budget gives the client a retry budget of its own", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([503])
      // maxTokens 4: the second failure leaves 2 tokens, which is not more than half: two calls in all
      const http = yield* client({
        retry: { schedule: fast, maxAttempts: 10, budget: { maxTokens: 4, tokenRatio: 0.1 } }
      })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("100 millis")
      yield* Queue.take(seen)
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.StatusError>
      expect(error.reason).toBe("budget")
      expect(error.attempts).toBe(2)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("exhausted retries carry the last status error", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([500])
      const http = yield* client({ retry: { schedule: fast, maxAttempts: 2 } })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1 second")
      yield* Queue.take(seen)
      const exit = yield* Fiber.join(call)
      expect(Exit.isFailure(exit)).toBe(true)
      const error = failureOf(exit)
      expect(error).toBeInstanceOf(Retry.RetriesExhausted)
      expect((error as Retry.RetriesExhausted<HttpErrors.StatusError>).last.status).toBe(500)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped(
    "a retried response's body is let go, so many retried 503s through a one-connection pool never stall",
    () =>
      Effect.gen(function*() {
        const big = "x".repeat(256 * 1024) // more than the socket buffers: unread, it holds its connection
        yield* serve(HttpRouter.empty.pipe(
          HttpRouter.get("/big", HttpServerResponse.text(big, { status: 503 })),
          HttpRouter.get("/small", HttpServerResponse.text("try again later", { status: 503 }))
        ))
        const server = yield* HttpServer.HttpServer
        const port = server.address._tag === "TcpAddress" ? server.address.port : 0
        const agent = yield* Effect.acquireRelease(
          Effect.sync(() => new Undici.Agent({ connections: 1 })),
          (a) => Effect.promise(() => a.destroy())
        )
        const zero = Schedule.forever.pipe(Schedule.as(Duration.zero))
        const http = yield* ResilientHttpClient.make({ retry: { schedule: zero, maxAttempts: 3 } }).pipe(
          Effect.provideService(HttpClient.HttpClient, NodeHttpClient.makeUndici(agent))
        )
        for (let i = 0; i < 10; i++) {
          for (const path of ["big", "small"]) {
            const error = failureOf(
              yield* Effect.exit(http.execute(HttpClientRequest.get(`http://127.0.0.1:${port}/${path}`)))
            )
            const last = (error as Retry.RetriesExhausted<HttpErrors.StatusError>).last
            expect(last.status).toBe(503)
            // the caller can still read the body, up to 64 KiB of it
            const text = yield* last.response.text
            expect(text).toBe(path === "big" ? big.slice(0, 64 * 1024) : "try again later")
          }
        }
      }).pipe(Effect.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))),
    30_000
  )

  it("rejects invalid options when called, not when run", () => {
    const invalid = [
      { attemptTimeout: -1 },
      { retry: { maxAttempts: 0 } },
      { retry: { budget: { maxTokens: 0, tokenRatio: 0.1 } } },
      { breaker: { trip: CircuitBreaker.consecutive(1), openFor: -1 } },
      { connectTimeout: "soon" },
      { rateLimiter: {} },
      { idempotencyKeys: { methods: "POST" } },
      { idempotencyKeys: { header: "" } },
      { deadlineHeader: "" }
    ] as unknown as ReadonlyArray<ResilientHttpClient.Options>
    for (const options of invalid) {
      expect(() => ResilientHttpClient.make(options)).toThrow(Cause.IllegalArgumentException)
      expect(() => ResilientHttpClient.layer(options)).toThrow(Cause.IllegalArgumentException)
      expect(() => ResilientHttpClientNode.layer(options)).toThrow(Cause.IllegalArgumentException)
    }
  })

  it.scoped("a read timeout is an unknown outcome: retried for GET, not for a POST without a key", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted(["hang", "ok", "hang"])
      const http = yield* client({ attemptTimeout: "1 second", idempotencyKeys: false })
      const get = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
      yield* Queue.take(seen)
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("100 millis")
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
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("connection refused never left: even a POST without a key is retried", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const http = yield* client({ idempotencyKeys: false })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/x`))))
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.join(call)
      const error = failureOf(exit) as Retry.RetriesExhausted<HttpErrors.ConnectFailed>
      expect(error).toBeInstanceOf(Retry.RetriesExhausted)
      expect(error.attempts).toBe(3)
      expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect(error.last.reason).toBe("refused")
    }).pipe(Effect.provide(ServerAndClient)))

  it.live("Node: a connect timeout is its own error, classified as not sent", () =>
    Effect.gen(function*() {
      // a listener that never accepts: once its backlog is full, new connections cannot be made
      const port = yield* stalledListener
      const http = yield* ResilientHttpClient.ResilientHttpClient
      const exit = yield* Effect.exit(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/`)))
      const error = failureOf(exit) as HttpErrors.ConnectFailed
      expect(error).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect(error.reason).toBe("timeout")
    }).pipe(
      Effect.provide(
        ResilientHttpClientNode.layer({ connectTimeout: "200 millis", retry: false, idempotencyKeys: false })
      ),
      Effect.scoped
    ), 20_000)

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
    expect(ResilientHttpClient.classifyTransportError(transport("UND_ERR_SOCKET"))._tag).toBe("NoResponse")
    const encode = new HttpClientError.RequestError({ request, reason: "Encode", cause: "x" })
    expect(ResilientHttpClient.classifyTransportError(encode)).toBe(encode)
  })

  it.scoped("sends the attempt's budget as a relative deadline header; the server runs under it", () =>
    Effect.gen(function*() {
      const seen: Array<[string | undefined, Option.Option<number>]> = []
      const app = HttpRouter.empty.pipe(
        HttpRouter.get(
          "/budget",
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            const remaining = yield* Deadline.remaining
            seen.push([request.headers["request-timeout-ms"], Option.map(remaining, Duration.toMillis)])
            return HttpServerResponse.text("ok")
          })
        ),
        DeadlineMiddleware.make()
      )
      yield* serve(app)
      const address = yield* HttpServer.HttpServer
      const port = address.address._tag === "TcpAddress" ? address.address.port : 0
      const url = `http://127.0.0.1:${port}/budget`
      const http = yield* client({ attemptTimeout: "5 seconds" })
      // no deadline: the attempt timeout is the budget
      yield* http.execute(HttpClientRequest.get(url))
      // a closer deadline wins, and the server runs under what is left of it
      yield* http.execute(HttpClientRequest.get(url)).pipe(Deadline.within("1500 millis"))
      expect(seen).toEqual([["5000", Option.some(5000)], ["1500", Option.some(1500)]])
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("a breaker per origin opens after failures and fails fast", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([500])
      const http = yield* client({
        retry: false,
        breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" }
      })
      yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
      yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
      const third = yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
      expect(failureOf(third)).toBeInstanceOf(CircuitBreaker.CircuitOpen)
      expect(yield* Queue.size(seen)).toBe(2)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("429 answers do not open the breaker: a throttling server is not down", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([[429, "1"]])
      const http = yield* client({
        retry: false,
        breaker: { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" },
        // each call is sent at once (shared backpressure would hold the next ones for a second)
        sharedBackpressure: false
      })
      for (let i = 0; i < 4; i++) {
        expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          HttpErrors.StatusError
        )
      }
      expect(yield* Queue.size(seen)).toBe(4)
    }).pipe(Effect.provide(ServerAndClient)))

  describe("shared backpressure per origin", () => {
    it.scoped("a 429 with Retry-After holds every caller of the origin until then, not only the one that heard it", () =>
      Effect.gen(function*() {
        const { seen, url } = yield* scripted([[429, "2"], "ok"])
        const http = yield* client({ retry: false })
        expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
          HttpErrors.StatusError
        )
        expect((yield* Queue.take(seen)).at).toBe(0)
        const other = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
        yield* TestClock.adjust("1999 millis")
        expect(yield* Queue.size(seen)).toBe(0)
        yield* TestClock.adjust("1 millis")
        expect((yield* Queue.take(seen)).at).toBe(2000)
        expect(yield* Fiber.join(other)).toEqual(Exit.succeed(200))
      }).pipe(Effect.provide(ServerAndClient)))

    it.scoped("a caller whose deadline ends before the pause fails at once, without sending", () =>
      Effect.gen(function*() {
        const { seen, url } = yield* scripted([[503, "10"], "ok"])
        const http = yield* client({ retry: false })
        yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
        yield* Queue.take(seen)
        const exit = yield* Effect.exit(http.execute(HttpClientRequest.get(url)).pipe(Deadline.within("5 seconds")))
        expect(failureOf(exit)).toBeInstanceOf(Deadline.DeadlineExceeded)
        expect(yield* Queue.size(seen)).toBe(0)
        expect(yield* TestClock.currentTimeMillis).toBe(0)
      }).pipe(Effect.provide(ServerAndClient)))

    it.scoped("a RateLimit field with no quota left pauses the origin for its reset; false turns it off", () =>
      Effect.gen(function*() {
        const { seen, url } = yield* scripted([{ status: 200, headers: { ratelimit: "\"default\";r=0;t=3" } }, "ok"])
        const http = yield* client()
        expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
        yield* Queue.take(seen)
        const next = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.get(url))))
        yield* TestClock.adjust("3 seconds")
        expect((yield* Queue.take(seen)).at).toBe(3000)
        yield* Fiber.join(next)

        const again = yield* scripted([{ status: 200, headers: { ratelimit: "\"default\";r=0;t=3" } }, "ok"])
        const own = yield* client({ sharedBackpressure: false })
        yield* own.execute(HttpClientRequest.get(again.url))
        yield* own.execute(HttpClientRequest.get(again.url))
        expect((yield* Queue.takeAll(again.seen)).pipe(Chunk.map((s) => s.at), Chunk.toReadonlyArray)).toEqual([
          3000,
          3000
        ])
      }).pipe(Effect.provide(ServerAndClient)))
  })

  it.scoped("every attempt carries the fiber's criticality", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted(["ok"])
      const http = yield* client()
      yield* http.execute(HttpClientRequest.get(url))
      yield* http.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("sheddable"))
      const off = yield* client({ criticalityHeader: false })
      yield* off.execute(HttpClientRequest.get(url)).pipe(Criticality.withCriticality("critical"))
      const sent = Chunk.toReadonlyArray(yield* Queue.takeAll(seen)).map((s) => s.criticality)
      expect(sent).toEqual(["default", "sheddable", undefined])
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("with throttle, a server refusing everything gets fewer requests than the calls, and the rest fail locally", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([503])
      const http = yield* client({ retry: false, throttle: true })
      let local = 0
      for (let i = 0; i < 40; i++) {
        const failure = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))
        if (failure instanceof AdaptiveThrottle.LocallyRejected) local++
      }
      const sent = Chunk.size(yield* Queue.takeAll(seen))
      expect(local).toBeGreaterThan(20)
      expect(sent + local).toBe(40)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("a breaker opened by a 503 stays open for its Retry-After when that is longer than openFor", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted([[503, "5"], "ok"])
      const http = yield* client({
        retry: false,
        breaker: { trip: CircuitBreaker.consecutive(1), openFor: "1 second" },
        sharedBackpressure: false
      })
      yield* Effect.exit(http.execute(HttpClientRequest.get(url)))
      yield* TestClock.adjust("4 seconds")
      expect(failureOf(yield* Effect.exit(http.execute(HttpClientRequest.get(url))))).toBeInstanceOf(
        CircuitBreaker.CircuitOpen
      )
      yield* TestClock.adjust("1 second")
      expect(yield* statusOf(http.execute(HttpClientRequest.get(url)))).toEqual(Exit.succeed(200))
      expect(Chunk.size(yield* Queue.takeAll(seen))).toBe(2)
    }).pipe(Effect.provide(ServerAndClient)))

  it.scoped("a client-side limiter paces attempts per origin", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted(["ok"])
      const rateLimiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const http = yield* client({ rateLimiter })
      yield* http.execute(HttpClientRequest.get(url))
      const second = yield* Effect.fork(http.execute(HttpClientRequest.get(url)))
      expect((yield* Queue.take(seen)).at).toBe(0)
      yield* TestClock.adjust("1 second")
      expect((yield* Queue.take(seen)).at).toBe(1000)
      yield* Fiber.join(second)
    }).pipe(Effect.provide(Layer.merge(ServerAndClient, RateLimiterStore.layerMemory))))

  it.scoped("with Chaos losing responses, a GET is retried and a keyed POST keeps its key", () =>
    Effect.gen(function*() {
      const { seen, url } = yield* scripted(["ok"])
      const base = yield* HttpClient.HttpClient
      const flaky = Chaos.client({ lostResponse: { probability: 0.5 } })(base)
      const http = yield* client({ retry: { schedule: fast, maxAttempts: 10 } }).pipe(
        Effect.provideService(HttpClient.HttpClient, flaky)
      )
      const call = yield* Effect.fork(statusOf(http.execute(HttpClientRequest.post(url))))
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(call)).toEqual(Exit.succeed(200))
      const attempts = Chunk.toReadonlyArray(yield* Queue.takeAll(seen))
      expect(attempts.length).toBeGreaterThan(1) // some responses were lost, and the POST was retried
      const keys = new Set(attempts.map((s) => s.key))
      expect(keys.size).toBe(1)
    }).pipe(Effect.withRandom(Random.fixed([0.1, 0.9])), Effect.provide(ServerAndClient)))
})

const freePort = Effect.async<number>((resume) => {
  const server = createNetServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** A TCP listener (in a python3 child, which can listen without accepting) whose backlog is already full. */
const stalledListener = Effect.acquireRelease(
  Effect.async<{ readonly port: number; readonly close: () => void }>((resume) => {
    const child = spawn("python3", [
      "-c",
      "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)"
    ])
    child.stdout.once("data", (data) => {
      const port = Number(String(data).trim())
      const fillers = Array.from({ length: 4 }, () => connect(port, "127.0.0.1"))
      const close = () => {
        fillers.forEach((s) => s.destroy())
        child.kill()
      }
      // one filler accepted into the queue (backlog 0) fills it: later handshakes go unanswered
      let ready = false
      for (const filler of fillers) {
        filler.on("error", () => {})
        filler.once("connect", () => {
          if (ready) return
          ready = true
          resume(Effect.succeed({ port, close }))
        })
      }
    })
  }),
  (listener) => Effect.sync(listener.close)
).pipe(Effect.map((l) => l.port))
