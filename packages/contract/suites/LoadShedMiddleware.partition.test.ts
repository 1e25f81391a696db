import { fork, HttpServerRequest, HttpServerResponse, scoped, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Queue } from "effect"
import { AdaptiveLimiter, LoadShedMiddleware } from "effect-resilience"

const requestWith = (headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(new Request("http://127.0.0.1/search", { headers }))

/** Runs the wrapped app for one request. */
const call = <E>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>,
  headers: Record<string, string> = {}
) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, requestWith(headers))

// a fixed limit, so the test decides when the server is full
const fixed = (limit: number) => ({ algorithm: AdaptiveLimiter.aimd(), minLimit: limit, maxLimit: limit })

describe("LoadShedMiddleware partitionBy", () => {
  const client = (request: HttpServerRequest.HttpServerRequest) => request.headers["x-client"] ?? "anonymous"
  // no capacity kept for critical work, so every request may wait for every slot
  const all = { default: 1, sheddable: 1 }
  // lets every forked request run until it blocks
  const calm = Effect.repeat(yieldNow, { times: 300 })

  /** One greedy client with 20 requests and two modest ones with 3 each, through 2 slots freed one at a time. */
  const admissions = (options: LoadShedMiddleware.Options) =>
    Effect.gen(function*() {
      const shed = yield* LoadShedMiddleware.make(options)
      const started: Array<string> = []
      const releases = yield* Queue.unbounded<void>()
      const app = shed(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        started.push(client(request))
        return Effect.as(Queue.take(releases), HttpServerResponse.empty())
      }))
      const send = (who: string, n: number) =>
        Effect.forEach(Array.from({ length: n }), () => fork(call(app, { "x-client": who })))
      const fibers = [...yield* send("greedy", 20)]
      yield* calm
      fibers.push(...yield* send("modest-a", 3), ...yield* send("modest-b", 3))
      yield* calm
      expect(started).toEqual(["greedy", "greedy"])
      // 24 releases admit the 24 waiters; 2 more let the last two finish
      for (let i = 0; i < 26; i++) {
        yield* Queue.offer(releases, undefined)
        yield* calm
      }
      const statuses = yield* Effect.forEach(fibers, (f) => Effect.map(Fiber.join(f), (r) => r.status))
      return { started: started.slice(2, 26), statuses }
    }).pipe(Effect.scoped)

  scoped(
    "while several clients wait, freed slots go to them in turn: the greedy one gets an equal share",
    () =>
      Effect.gen(function*() {
        const { started, statuses } = yield* admissions({ limiter: { ...fixed(2), shares: all }, partitionBy: client })
        // the nine slots freed while all three waited: three each, in turn
        expect(started.slice(0, 9)).toEqual(Array.from({ length: 3 }, () => ["greedy", "modest-a", "modest-b"]).flat())
        // then nobody else waits: the greedy client gets every slot (work-conserving)
        expect(started.slice(9).every((who) => who === "greedy")).toBe(true)
        expect(started).toHaveLength(24)
        expect(statuses.every((s) => s === 204)).toBe(true)
      })
  )

  scoped(
    "without it, the same queue is first come first served: the modest clients wait behind the greedy one",
    () =>
      Effect.gen(function*() {
        const { started } = yield* admissions({ limiter: { ...fixed(2), shares: all, maxQueue: 100 } })
        expect(started.slice(0, 18).every((who) => who === "greedy")).toBe(true)
      })
  )

  scoped(
    "criticality comes first: a request over its share waits, and a critical one passes it",
    () =>
      Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(4), partitionBy: client, trustCritical: true })
        const started: Array<string> = []
        const releases = yield* Queue.unbounded<void>()
        const app = shed(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          started.push(`${client(request)}:${request.headers["request-criticality"] ?? "default"}`)
          return Effect.as(Queue.take(releases), HttpServerResponse.empty())
        }))
        const send = (who: string, n: number, level = "default") =>
          Effect.forEach(
            Array.from({ length: n }),
            () => fork(call(app, { "x-client": who, "request-criticality": level }))
          )
        // default requests may fill 3 of the 4 slots (share 0.9); the others wait instead of a 503
        const fibers = [...yield* send("greedy", 5)]
        yield* calm
        fibers.push(...yield* send("modest", 1, "critical"))
        yield* calm
        expect(started).toEqual(["greedy:default", "greedy:default", "greedy:default", "modest:critical"])
        fibers.push(...yield* send("modest", 1, "critical"))
        yield* calm
        // a slot frees at 3 taken: only the critical waiter may have it, though the greedy ones waited first
        yield* Queue.offer(releases, undefined)
        yield* calm
        expect(started.at(-1)).toBe("modest:critical")
        for (let i = 0; i < 6; i++) {
          yield* Queue.offer(releases, undefined)
          yield* calm
        }
        const statuses = yield* Effect.forEach(fibers, (f) => Effect.map(Fiber.join(f), (r) => r.status))
        expect(statuses.every((s) => s === 204)).toBe(true)
      }).pipe(Effect.scoped)
  )

  it("must be a function of the request", () => {
    expect(() => LoadShedMiddleware.make({ partitionBy: "customer" as never })).toThrow(/partitionBy/)
  })
})
