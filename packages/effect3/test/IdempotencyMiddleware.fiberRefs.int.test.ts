/**
 * The idempotency middleware and a handler's FiberRefs: Effect 3's only (Effect 4 has no FiberRefs; the server
 * reads a pre-response handler from one after the app). Over a real server, which applies them. The rest of the
 * middleware's behaviour is the shared contract's (test/contract/IdempotencyMiddleware*.test.ts).
 */
import { HttpApp, HttpRouter, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { post, serve, TestServer } from "./support/httpServer.js"

const withServer = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(Layer.merge(TestServer, IdempotencyStore.layerMemory)))

describe("IdempotencyMiddleware and FiberRefs", () => {
  it.scoped("a handler's FiberRef changes reach the server, as from a joined fiber, whether it answers at once or later", () =>
    withServer(Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      // a pre-response handler is a FiberRef the server reads after the app: set inside the handler's fiber
      const marked = (value: string) =>
        HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(HttpServerResponse.setHeader(response, "x-marked", value))
        )
      const router = HttpRouter.empty.pipe(
        HttpRouter.post("/now", Effect.as(marked("now"), HttpServerResponse.unsafeJson({ ok: 1 }))),
        HttpRouter.post(
          "/later",
          marked("later").pipe(
            Effect.zipRight(Deferred.succeed(entered, undefined)),
            Effect.zipRight(Deferred.await(gate)),
            Effect.as(HttpServerResponse.unsafeJson({ ok: 2 }))
          )
        ),
        HttpRouter.post("/plain", HttpServerResponse.json({ ok: 3 }))
      )
      yield* serve(router.pipe(yield* IdempotencyMiddleware.make()))
      const now = yield* post("/now", { key: "fr-1" })
      const later = yield* Effect.fork(post("/later", { key: "fr-2" }))
      yield* Deferred.await(entered)
      yield* Deferred.succeed(gate, undefined)
      const plain = yield* post("/plain", { key: "fr-3" })
      expect(now.headers["x-marked"]).toBe("now")
      expect((yield* Fiber.join(later)).headers["x-marked"]).toBe("later")
      expect(plain.status).toBe(200)
      expect(plain.headers["x-marked"]).toBeUndefined()
    })))
})
