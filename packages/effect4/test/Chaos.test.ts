/** Chaos on `effect/http`: the client transform and the server middleware, in memory under the TestClock. */
import { fork } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { HttpClientError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import * as Chaos from "../src/Chaos.js"
import { ResilientHttpClient } from "../src/index.js"
import { scriptedClient } from "./contract/support/memoryHttp.js"
import { fixed, withRandom } from "./support/random.js"

const url = "http://api.test/orders"

describe("Chaos.client", () => {
  it.effect("a connect failure is Effect 4's transport error, which the resilient client reads as never sent", () =>
    Effect.gen(function*() {
      const { client, log } = yield* scriptedClient([200])
      const error = yield* Effect.flip(Chaos.client({ connectFailure: { probability: 1 } })(client).get(url))
      expect(error).toBeInstanceOf(HttpClientError.HttpClientError)
      expect(error.reason._tag).toBe("TransportError")
      expect(ResilientHttpClient.classifyTransportError(error)).toMatchObject({
        _tag: "ConnectFailed",
        reason: "refused"
      })
      expect(log).toHaveLength(0)
    }))

  it.effect("an error response answers instead of the server, with Retry-After in whole seconds", () =>
    Effect.gen(function*() {
      const { client, log } = yield* scriptedClient([200])
      const chaotic = Chaos.client({ errorResponse: { probability: 1, status: 503, retryAfter: "1500 millis" } })(
        client
      )
      const response = yield* chaotic.get(url)
      expect([response.status, response.headers["retry-after"]]).toEqual([503, "2"])
      expect(log).toHaveLength(0)
    }))

  it.effect("a lost response: the server handled it, the caller sees a reset", () =>
    Effect.gen(function*() {
      const { client, log } = yield* scriptedClient([201])
      const error = yield* Effect.flip(Chaos.client({ lostResponse: { probability: 1 } })(client).post(url))
      expect(ResilientHttpClient.classifyTransportError(error)).toMatchObject({ _tag: "NoResponse", reason: "reset" })
      expect(log).toHaveLength(1)
    }))
})

describe("Chaos.middleware", () => {
  /** A handler that counts its runs, and a request whose source has a socket that records being destroyed. */
  const setup = () => {
    const state = { handled: 0, destroyed: false }
    const app = Effect.sync(() => {
      state.handled++
      return HttpServerResponse.text("hello")
    })
    const source = Object.assign(new Request(url), { socket: { destroy: () => void (state.destroyed = true) } })
    const serve = <E, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.provideService(effect, HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(source))
    return { app, serve, state }
  }

  it.effect("refuses a share of requests with the status and Retry-After, without running the handler", () =>
    Effect.gen(function*() {
      const { app, serve, state } = setup()
      const chaotic = app.pipe(
        Chaos.middleware({ errorResponse: { probability: 0.5, status: 503, retryAfter: "1 second" } })
      )
      const statuses: Array<number> = []
      for (let i = 0; i < 4; i++) statuses.push((yield* serve(chaotic)).status)
      expect(statuses).toEqual([503, 200, 503, 200])
      expect(state.handled).toBe(2)
      const refused = yield* serve(chaotic)
      expect([refused.status, refused.headers["retry-after"]]).toEqual([503, "1"])
    }).pipe(withRandom(fixed([0.1, 0.9]))))

  it.effect("latency delays the handler on the Clock", () =>
    Effect.gen(function*() {
      const { app, serve, state } = setup()
      const served = yield* fork(serve(app.pipe(Chaos.middleware({ latency: { probability: 1, delay: "3 seconds" } }))))
      yield* TestClock.adjust("2999 millis")
      expect(state.handled).toBe(0)
      yield* TestClock.adjust("1 milli")
      expect((yield* Fiber.join(served)).status).toBe(200)
    }))

  it.effect("a lost response destroys the request's socket after the handler ran", () =>
    Effect.gen(function*() {
      const { app, serve, state } = setup()
      yield* serve(app.pipe(Chaos.middleware({ lostResponse: { probability: 1 } })))
      expect(state).toEqual({ handled: 1, destroyed: true })
    }))
})
