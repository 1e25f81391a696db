import { fork, HttpServerRequest, HttpServerResponse, pollUnsafe, scoped, TestClock, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import {
  AdaptiveLimiter,
  Criticality,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware
} from "effect-resilience"

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 20 })

const requestWith = (headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(new Request("http://127.0.0.1/search", { headers }))

/** Runs the wrapped app for one request. */
const call = <E>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>,
  headers: Record<string, string> = {}
) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, requestWith(headers))

// a fixed limit, so the test decides when the server is full
const fixed = (limit: number) => ({ algorithm: AdaptiveLimiter.aimd(), minLimit: limit, maxLimit: limit })

const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined

describe("LoadShedMiddleware", () => {
  scoped("admits below the limit and runs the handler under the request's criticality", () =>
    Effect.gen(function*() {
      const shed = yield* LoadShedMiddleware.make({ limiter: fixed(4) })
      const app = shed(Effect.map(Criticality.current, (level) => HttpServerResponse.text(level)))
      const plain = yield* call(app)
      expect(plain.status).toBe(200)
      expect(plain.body._tag === "Uint8Array" && new TextDecoder().decode(plain.body.body)).toBe("default")
      const low = yield* call(app, { "request-criticality": "sheddable" })
      expect(low.body._tag === "Uint8Array" && new TextDecoder().decode(low.body.body)).toBe("sheddable")
    }))

  scoped(
    "at the limit, refuses with 503, Retry-After and a problem body before the handler runs",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(2), retryAfter: "3 seconds", trustCritical: true })
        const gate = yield* Deferred.make<void>()
        let ran = 0
        const app = shed(
          Effect.sync(() => ran++).pipe(Effect.andThen(Deferred.await(gate)), Effect.as(HttpServerResponse.empty()))
        )
        const held = yield* Effect.forEach(
          [1, 2],
          () => fork(call(app, { "request-criticality": "critical" }))
        )
        yield* settle
        // critical requests may use the whole limit, and it is in use
        const refused = yield* call(app, { "request-criticality": "critical" })
        expect(refused.status).toBe(503)
        expect(refused.headers["retry-after"]).toBe("3")
        expect(refused.headers["content-type"]).toBe("application/problem+json")
        expect(bodyOf(refused).type).toBe(LoadShedMiddleware.overloadedType)
        expect(ran).toBe(2)
        yield* Deferred.succeed(gate, undefined)
        yield* Effect.forEach(held, Fiber.join)
      })
  )

  scoped(
    "by default the limiter starts at 4 concurrent requests, or at minLimit when that is higher",
    () =>
      Effect.gen(function*() {
        const admitted = (options: LoadShedMiddleware.Options) =>
          Effect.gen(function*() {
            const shed = yield* LoadShedMiddleware.make({ ...options, trustCritical: true })
            const gate = yield* Deferred.make<void>()
            const app = shed(Effect.as(Deferred.await(gate), HttpServerResponse.empty()))
            const critical = { "request-criticality": "critical" }
            const fibers = yield* Effect.forEach(Array.from({ length: 12 }), () => fork(call(app, critical)))
            yield* settle
            // the requests still running are the ones admitted; the others were refused at once
            const running = fibers.filter((f) => pollUnsafe(f) === undefined).length
            yield* Deferred.succeed(gate, undefined)
            yield* Effect.forEach(fibers, Fiber.join)
            return running
          }).pipe(Effect.scoped)
        expect(yield* admitted({})).toBe(4)
        expect(yield* admitted({ limiter: { minLimit: 6 } })).toBe(6)
        expect(yield* admitted({ limiter: { initialLimit: 10 } })).toBe(10)
      })
  )

  scoped(
    "sheddable requests are refused first, and critical ones only from a trusted caller use the top",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(10), trustCritical: true })
        const gate = yield* Deferred.make<void>()
        const app = shed(Effect.as(Deferred.await(gate), HttpServerResponse.empty()))
        const hold = (level: string) => fork(call(app, { "request-criticality": level }))
        const held = yield* Effect.forEach(Array.from({ length: 7 }), () => hold("default"))
        yield* settle
        const statusFor = (level: string) =>
          Effect.map(
            call(Effect.as(Effect.void, HttpServerResponse.empty()).pipe(shed), { "request-criticality": level }),
            (r) => r.status
          )
        expect(yield* statusFor("sheddable")).toBe(503)
        held.push(yield* hold("default"), yield* hold("default"))
        yield* settle
        expect(yield* statusFor("default")).toBe(503)
        held.push(yield* hold("critical"))
        yield* settle
        expect(yield* statusFor("critical")).toBe(503)
        yield* Deferred.succeed(gate, undefined)
        const exits = yield* Effect.forEach(held, Fiber.await)
        expect(exits.every((exit) => Exit.isSuccess(exit) && exit.value.status === 204)).toBe(true)
      })
  )

  scoped(
    "an untrusted critical claim counts as default; a criticality function decides instead of the header",
    () =>
      Effect.gen(function*() {
        const untrusted = yield* LoadShedMiddleware.make({ limiter: fixed(4) })
        const echo = Effect.map(Criticality.current, (level) => HttpServerResponse.text(level))
        const text = (r: HttpServerResponse.HttpServerResponse) =>
          r.body._tag === "Uint8Array" ? new TextDecoder().decode(r.body.body) : ""
        expect(text(yield* call(untrusted(echo), { "request-criticality": "critical" }))).toBe("default")
        expect(text(yield* call(untrusted(echo), { "request-criticality": "urgent" }))).toBe("default")
        const own = yield* LoadShedMiddleware.make({
          limiter: fixed(4),
          criticality: (request) => Effect.succeed(request.headers["x-api-key"] === "ops" ? "critical" : "sheddable")
        })
        expect(text(yield* call(own(echo), { "x-api-key": "ops" }))).toBe("critical")
        expect(text(yield* call(own(echo), { "request-criticality": "critical" }))).toBe("sheddable")
      })
  )

  scoped("the app's own failures pass through: only the limiter's refusal is a 503", () =>
    Effect.gen(function*() {
      const shed = yield* LoadShedMiddleware.make({ limiter: fixed(1) })
      const failing = shed(Effect.fail("handler failed" as const))
      expect(yield* Effect.flip(call(failing))).toBe("handler failed")
      expect((yield* call(shed(Effect.succeed(HttpServerResponse.empty())))).status).toBe(204)
    }))

  scoped(
    "with a queue: a request interrupted while it waits leaves the queue and never runs",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: { ...fixed(1), maxQueue: 1 }, trustCritical: true })
        const gate = yield* Deferred.make<void>()
        let ran = 0
        const app = shed(
          Effect.sync(() => ran++).pipe(Effect.andThen(Deferred.await(gate)), Effect.as(HttpServerResponse.empty()))
        )
        const critical = { "request-criticality": "critical" }
        const first = yield* fork(call(app, critical))
        yield* settle
        const queued = yield* fork(call(app, critical))
        yield* settle
        expect((yield* call(app, critical)).status).toBe(503) // the queue holds one
        yield* Fiber.interrupt(queued)
        const next = yield* fork(call(app, critical)) // its place in the queue is free again
        yield* settle
        expect(pollUnsafe(next)).toBeUndefined()
        yield* Deferred.succeed(gate, undefined)
        expect((yield* Fiber.join(first)).status).toBe(204)
        expect((yield* Fiber.join(next)).status).toBe(204)
        expect(ran).toBe(2)
      })
  )

  it("refuses options that could never work, when called", () => {
    expect(() => LoadShedMiddleware.make({ header: "" })).toThrow(/header/)
    expect(() => LoadShedMiddleware.make({ retryAfter: -1 })).toThrow(/retryAfter/)
    expect(() => LoadShedMiddleware.make({ limiter: { minLimit: 5, maxLimit: 2 } })).toThrow(/minLimit/)
    expect(() => LoadShedMiddleware.make({ maxBodyBytes: 0 })).toThrow(/maxBodyBytes/)
    expect(() => LoadShedMiddleware.make({ bodyTimeout: 0 })).toThrow(/bodyTimeout/)
  })
})

/** A POST whose body is `body`, or one that never finishes arriving. */
const upload = (body: Uint8Array | "never", headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(
    new Request("http://127.0.0.1/upload", {
      method: "POST",
      body: body === "never" ? new ReadableStream({ start: () => {} }) : body,
      duplex: "half",
      headers: { "content-length": body === "never" ? "100" : String(body.byteLength), ...headers }
    } as RequestInit)
  )

describe("LoadShedMiddleware and request bodies", () => {
  scoped("a client still sending its body holds no slot, and gets 408 after bodyTimeout", () =>
    Effect.gen(function*() {
      const shed = yield* LoadShedMiddleware.make({ limiter: fixed(1), trustCritical: true })
      const critical = { "request-criticality": "critical" }
      let ran = 0
      // an app that reads the body, as most do (the idempotency middleware does)
      const app = shed(
        Effect.flatMap(
          HttpServerRequest.HttpServerRequest,
          (request) =>
            Effect.map(Effect.orDie(request.text), (text) => {
              ran++
              return HttpServerResponse.text(`read ${text.length}`)
            })
        )
      )
      // uninterruptible, as @effect/platform runs an app: the timeout must still stop the read
      const stalled = yield* fork(
        Effect.uninterruptible(
          Effect.provideService(app, HttpServerRequest.HttpServerRequest, upload("never", critical))
        )
      )
      yield* settle
      // the only slot is free for a request that has its body
      const ready = yield* Effect.provideService(
        app,
        HttpServerRequest.HttpServerRequest,
        upload(new Uint8Array(3), critical)
      )
      expect(ready.status).toBe(200)
      expect(ran).toBe(1)
      yield* TestClock.adjust("4999 millis")
      expect(pollUnsafe(stalled)).toBeUndefined()
      yield* TestClock.adjust("1 millis")
      const timedOut = yield* Fiber.join(stalled)
      expect(timedOut.status).toBe(408)
      expect(timedOut.headers["content-type"]).toBe("application/problem+json")
      expect(timedOut.headers["connection"]).toBe("close")
      expect(bodyOf(timedOut)).toMatchObject({ status: 408, title: "Request Timeout" })
      expect(ran).toBe(1)
    }))

  scoped(
    "a body over maxBodyBytes gets 413, declared or sent; one within it reaches the app as sent",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(4), maxBodyBytes: 8 })
        const echo = shed(
          Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) =>
              Effect.map(
                Effect.orDie(request.arrayBuffer),
                (bytes) => HttpServerResponse.uint8Array(new Uint8Array(bytes))
              )
          )
        )
        const send = (request: HttpServerRequest.HttpServerRequest) =>
          Effect.provideService(echo, HttpServerRequest.HttpServerRequest, request)
        const declared = yield* send(upload(new Uint8Array(9)))
        expect(declared.status).toBe(413)
        expect(bodyOf(declared)).toMatchObject({ status: 413 })
        // a length that lies: the bytes are counted as they arrive
        expect((yield* send(upload(new Uint8Array(9), { "content-length": "4" }))).status).toBe(413)
        const bytes = new Uint8Array([0xff, 0x00, 0xfe, 0x80])
        const echoed = yield* send(upload(bytes))
        expect(echoed.status).toBe(200)
        expect(echoed.body._tag === "Uint8Array" && [...echoed.body.body]).toEqual([...bytes])
      })
  )

  scoped(
    "the idempotency middleware inside reads the same bytes: fingerprint and handler see the body as sent",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(4) })
        const idempotent = yield* IdempotencyMiddleware.make({ scope: () => Effect.succeed("client") })
        let ran = 0
        const app = shed(
          idempotent(
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) =>
                Effect.map(Effect.orDie(request.arrayBuffer), (bytes) => {
                  ran++
                  return HttpServerResponse.uint8Array(new Uint8Array(bytes), { status: 201 })
                })
            )
          )
        )
        const send = (bytes: Uint8Array) =>
          Effect.provideService(app, HttpServerRequest.HttpServerRequest, upload(bytes, { "idempotency-key": "k" }))
        // not UTF-8: a body decoded as text and encoded again would come out otherwise
        const first = yield* send(new Uint8Array([0xff, 0xfe, 0x01]))
        expect(first.status).toBe(201)
        expect(first.body._tag === "Uint8Array" && [...first.body.body]).toEqual([0xff, 0xfe, 0x01])
        expect((yield* send(new Uint8Array([0xff, 0xfe, 0x01]))).headers[IdempotencyMiddleware.replayedHeader]).toBe(
          "true"
        )
        expect((yield* send(new Uint8Array([0xfe, 0xff, 0x01]))).status).toBe(422)
        expect(ran).toBe(1)
      }).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )
})
