import {
  HttpApp,
  HttpClient,
  HttpClientRequest,
  HttpRouter,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Data, Deferred, Duration, Effect, Fiber, Layer, TestClock } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { asClient, post, rawReply, rawStatus, send, serve, TestServer } from "./support/httpServer.js"

/** An orders endpoint that counts how often its handler really ran. */
const makeOrders = (
  behaviour: (n: number) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, any> = (n) =>
    Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) =>
        Effect.flatMap(Effect.orDie(request.json), (body) =>
          HttpServerResponse.json({ id: n, ...(body as object) }, {
            status: 201,
            headers: { location: `/orders/${n}` },
            cookies: undefined
          }).pipe(Effect.orDie, Effect.map(HttpServerResponse.unsafeSetCookie("session", "secret"))))
    )
) => {
  let runs = 0
  const router = HttpRouter.empty.pipe(
    HttpRouter.post("/orders", Effect.suspend(() => behaviour(++runs))),
    HttpRouter.get("/orders", HttpServerResponse.text("list"))
  )
  return { router, runs: () => runs }
}

/** Orders whose handler signals `entered`, then waits for `gate` before answering 201. */
const gatedOrders = Effect.gen(function*() {
  const gate = yield* Deferred.make<void>()
  const entered = yield* Deferred.make<void>()
  const orders = makeOrders((n) =>
    Deferred.succeed(entered, undefined).pipe(
      Effect.zipRight(Deferred.await(gate)),
      Effect.as(HttpServerResponse.unsafeJson({ id: n }, { status: 201 }))
    )
  )
  return { entered, gate, orders }
})

const withServer = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(Layer.merge(TestServer, IdempotencyStore.layerMemory)))

describe("IdempotencyMiddleware", () => {
  it.scoped("runs the first request and replays it for the same key", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      const first = yield* post("/orders", { key: "k-1", body: { sku: "BOOK-1" } })
      const again = yield* post("/orders", { key: "k-1", body: { sku: "BOOK-1" } })
      expect(first.status).toBe(201)
      expect(JSON.parse(first.body)).toEqual({ id: 1, sku: "BOOK-1" })
      expect(first.headers["set-cookie"]).toContain("session=secret")
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      expect(again.status).toBe(201)
      expect(again.body).toBe(first.body)
      expect(again.headers["content-type"]).toBe(first.headers["content-type"])
      expect(again.headers["location"]).toBe("/orders/1")
      expect(again.headers["idempotent-replayed"]).toBe("true")
      expect(again.headers["set-cookie"]).toBeUndefined()
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("accepts the key as a Structured Fields string or a bare token (the same key)", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      yield* post("/orders", { key: "\"abc-123\"" })
      const bare = yield* post("/orders", { key: "abc-123" })
      expect(bare.headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("answers 400 problem+json for a missing, empty, too long or non-ASCII key", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      for (const key of [undefined, "", "   ", "x".repeat(256), "\"unterminated", "two words"]) {
        const reply = yield* post("/orders", key === undefined ? {} : { key })
        expect(reply.status, `key ${JSON.stringify(key)}`).toBe(400)
        expect(reply.headers["content-type"]).toBe("application/problem+json")
        expect(JSON.parse(reply.body).status).toBe(400)
      }
      // bytes an HTTP client refuses to send: a control character, non-ASCII
      for (const key of ["a\u0001b", "cl\u00e9"]) {
        const status = yield* rawStatus(
          `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`
        )
        expect(status, `key ${JSON.stringify(key)}`).toBe(400)
      }
      expect((yield* post("/orders", { key: "x".repeat(255) })).status).toBe(201)
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("answers 422 when the key is reused with another body or path", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      yield* post("/orders", { key: "k", body: { qty: 1 } })
      const other = yield* post("/orders", { key: "k", body: { qty: 9 } })
      expect(other.status).toBe(422)
      expect(JSON.parse(other.body).type).toContain("idempotency-key-reused")
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("answers 409 with Retry-After while the first request is still running", () =>
    withServer(Effect.gen(function*() {
      const { entered, gate, orders } = yield* gatedOrders
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      const first = yield* Effect.fork(post("/orders", { key: "slow" }))
      yield* Deferred.await(entered)
      const second = yield* post("/orders", { key: "slow" })
      expect(second.status).toBe(409)
      expect(second.headers["retry-after"]).toBe("1")
      yield* Deferred.succeed(gate, undefined)
      expect((yield* Fiber.join(first)).status).toBe(201)
      expect((yield* post("/orders", { key: "slow" })).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("50 simultaneous duplicates run the handler once; every answer is 201 or 409", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      const replies = yield* Effect.forEach(
        Array.from({ length: 50 }, () => post("/orders", { key: "dup", body: { sku: "A" } })),
        (request) => request,
        { concurrency: "unbounded" }
      )
      expect(orders.runs()).toBe(1)
      for (const reply of replies) expect([201, 409]).toContain(reply.status)
      const created = replies.filter((r) => r.status === 201)
      expect(new Set(created.map((r) => r.body)).size).toBe(1)
    })))

  it.scoped("a handler defect is stored as the 500 the server answered: it may have committed first", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders((n) =>
        n === 1 ? Effect.die("crash") : Effect.succeed(HttpServerResponse.unsafeJson({ id: n }, { status: 201 }))
      )
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      expect((yield* post("/orders", { key: "crashy" })).status).toBe(500)
      const retry = yield* post("/orders", { key: "crashy" })
      expect(retry.status).toBe(500)
      expect(retry.headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("a typed failure says the handler did nothing: the key is released and a retry runs again", () =>
    withServer(Effect.gen(function*() {
      class Unavailable extends Data.TaggedError("Unavailable") {}
      let runs = 0
      const handler = Effect.suspend(() =>
        ++runs === 1 ? Effect.fail(new Unavailable()) : Effect.succeed(HttpServerResponse.text("ok", { status: 201 }))
      )
      const idempotent = yield* IdempotencyMiddleware.make()
      yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", handler.pipe(idempotent))))
      expect((yield* post("/orders", { key: "typed" })).status).toBe(500)
      const retry = yield* post("/orders", { key: "typed" })
      expect(retry.status).toBe(201)
      expect(retry.headers["idempotent-replayed"]).toBeUndefined()
      expect(runs).toBe(2)
    })))

  it.scoped("5xx responses are stored and replayed by default", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders(() => Effect.succeed(HttpServerResponse.text("boom", { status: 500 })))
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      yield* post("/orders", { key: "five" })
      const replay = yield* post("/orders", { key: "five" })
      expect(replay.status).toBe(500)
      expect(replay.body).toBe("boom")
      expect(replay.headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("storeServerErrors: false releases the key on 5xx", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders((n) =>
        Effect.succeed(HttpServerResponse.text(`attempt ${n}`, { status: n === 1 ? 500 : 201 }))
      )
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make({ storeServerErrors: false })))
      expect((yield* post("/orders", { key: "k" })).status).toBe(500)
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      expect((yield* post("/orders", { key: "k" })).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
    })))

  it.scoped("bodies over maxBodyBytes get 413 and never reach the handler", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make({ maxBodyBytes: 100 })))
      const big = yield* post("/orders", { key: "big", body: { blob: "x".repeat(200) } })
      expect(big.status).toBe(413)
      // no Content-Length: the body is chunked, and the read stops once it is too large
      const chunk = "x".repeat(80)
      const chunked = yield* rawStatus(
        "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: chunky\r\nTransfer-Encoding: chunked\r\n" +
          `Connection: close\r\n\r\n50\r\n${chunk}\r\n50\r\n${chunk}\r\n0\r\n\r\n`
      )
      expect(chunked).toBe(413)
      expect(orders.runs()).toBe(0)
    })))

  it.scoped("fingerprints the request line's target as sent, whatever the Host header says", () =>
    withServer(Effect.gen(function*() {
      let runs = 0
      // every target answered, no router in between: the middleware alone decides
      const handler = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`, { status: 201 }))
      yield* serve(handler.pipe(yield* IdempotencyMiddleware.make()))
      // raw bytes: an HTTP client would drop the fragment, and refuses a malformed Host
      const sent = (target: string, host = "127.0.0.1") =>
        rawReply(
          `POST ${target} HTTP/1.1\r\nHost: ${host}\r\nIdempotency-Key: target\r\nContent-Type: application/json\r\n` +
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
      expect(yield* sent("/orders")).toMatch(/^HTTP\/1\.1 201 /)
      // another target, as the client wrote it
      for (const target of ["/orders?", "/orders#frag", "/orders/"]) {
        expect(yield* sent(target), target).toMatch(/^HTTP\/1\.1 422 /)
      }
      // the same target, whatever the Host, or an authority in the target itself
      for (
        const [target, host] of [
          ["/orders", "a/b"],
          ["/orders", "[::1"],
          ["/orders", "elsewhere.example:8080"],
          ["http://elsewhere.example:8080/orders", "127.0.0.1"]
        ] as const
      ) {
        const reply = yield* sent(target, host)
        expect(reply, `${target} with Host ${host}`).toMatch(/^HTTP\/1\.1 201 /)
        expect(reply.toLowerCase()).toContain("idempotent-replayed: true")
      }
      expect(runs).toBe(1)
    })))

  it.scoped("other methods pass through; keys are scoped per client address", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      expect((yield* send(HttpClientRequest.get("/orders"))).body).toBe("list")
      const first = yield* post("/orders", { key: "same", body: { sku: "A" } })
      const other = yield* post("/orders", { key: "same", body: { sku: "A" } }).pipe(asClient("127.0.0.2"))
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      expect(other.headers["idempotent-replayed"]).toBeUndefined()
      expect(JSON.parse(other.body).id).toBe(2)
      expect(orders.runs()).toBe(2)
    })))

  it.scoped("replays are byte-exact for binary bodies", () =>
    withServer(Effect.gen(function*() {
      const bytes = new Uint8Array([0, 255, 1, 254, 128, 10, 13])
      const orders = makeOrders(() =>
        Effect.succeed(HttpServerResponse.uint8Array(bytes, { status: 200, contentType: "application/octet-stream" }))
      )
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      const fetchBytes = Effect.flatMap(HttpClient.HttpClient, (client) =>
        Effect.scoped(Effect.flatMap(
          client.execute(HttpClientRequest.post("/orders").pipe(HttpClientRequest.setHeader("idempotency-key", "bin"))),
          (r) => Effect.map(r.arrayBuffer, (b) => [r.headers["content-type"], [...new Uint8Array(b)]] as const)
        )))
      const first = yield* fetchBytes
      const again = yield* fetchBytes
      expect(again).toEqual(first)
      expect(again[1]).toEqual([...bytes])
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("completed keys expire after the TTL", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make({ ttl: "1 hour" })))
      yield* post("/orders", { key: "ttl" })
      yield* TestClock.adjust("59 minutes")
      expect((yield* post("/orders", { key: "ttl" })).headers["idempotent-replayed"]).toBe("true")
      yield* TestClock.adjust("2 minutes")
      expect((yield* post("/orders", { key: "ttl" })).headers["idempotent-replayed"]).toBeUndefined()
      expect(orders.runs()).toBe(2)
    })))

  it.effect("a claim left by a crashed process is taken over after the lease", () =>
    withServer(Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      // a "crashed" owner: it claimed the key and will never renew, complete or release it
      const stale = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(stale._tag).toBe("Claimed")
      const again = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(again._tag).toBe("InProgress")
      yield* TestClock.adjust("61 seconds")
      const takeover = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(takeover._tag).toBe("Claimed")
      const response = { status: 201, headers: {}, body: new Uint8Array() }
      // the old owner's late completion is refused; the new owner's is accepted
      expect(
        yield* store.complete({ scope: "s", key: "orphan", token: (stale as any).token }, response, Duration.hours(1))
      )
        .toBe(false)
      expect(
        yield* store.complete(
          { scope: "s", key: "orphan", token: (takeover as any).token },
          response,
          Duration.hours(1)
        )
      )
        .toBe(true)
    })))

  it.scoped("a live handler renews its lease, so a slow request is not taken over", () =>
    withServer(Effect.gen(function*() {
      const { entered, gate, orders } = yield* gatedOrders
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make({ lease: "3 seconds" })))
      const first = yield* Effect.fork(post("/orders", { key: "slow" }))
      yield* Deferred.await(entered)
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect((yield* post("/orders", { key: "slow" })).status).toBe(409)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      expect(orders.runs()).toBe(1)
    })))

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

  it.scoped("fails closed with 503 when the store is down: the handler does not run", () =>
    Effect.gen(function*() {
      const orders = makeOrders()
      yield* serve(orders.router.pipe(yield* IdempotencyMiddleware.make()))
      const reply = yield* post("/orders", { key: "down" })
      expect(reply.status).toBe(503)
      expect(reply.headers["retry-after"]).toBe("1")
      expect(orders.runs()).toBe(0)
    }).pipe(Effect.provide(Layer.merge(
      TestServer,
      Layer.succeed(IdempotencyStore.IdempotencyStore, {
        claim: () => Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation: "claim", cause: "down" })),
        complete: () => Effect.succeed(false),
        renew: () => Effect.succeed(false),
        release: () => Effect.void
      })
    ))))

  it.scoped("works under a router prefix and after an outer middleware read the body", () =>
    withServer(Effect.gen(function*() {
      const orders = makeOrders()
      const readFirst = <E, R>(app: HttpApp.Default<E, R>) =>
        Effect.flatMap(
          HttpServerRequest.HttpServerRequest,
          (request) => Effect.zipRight(Effect.orDie(request.text), app)
        )
      const app = orders.router.pipe(HttpRouter.prefixAll("/api"), yield* IdempotencyMiddleware.make(), readFirst)
      yield* serve(app)
      const first = yield* post("/api/orders", { key: "prefixed", body: { sku: "A" } })
      expect(first.status).toBe(201)
      expect(JSON.parse(first.body)).toEqual({ id: 1, sku: "A" })
      expect((yield* post("/api/orders", { key: "prefixed", body: { sku: "A" } })).headers["idempotent-replayed"]).toBe(
        "true"
      )
      expect(orders.runs()).toBe(1)
    })))

  describe("behind a middleware that read the body first (a logger, an HMAC check)", () => {
    /** A handler that answers the bytes it was given, in hex, behind an outer middleware that read the body. */
    const served = (read: "text" | "arrayBuffer") =>
      Effect.gen(function*() {
        let runs = 0
        const handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.map(Effect.orDie(request.arrayBuffer), (bytes) => {
            runs++
            return HttpServerResponse.text(Buffer.from(bytes).toString("hex"), { status: 201 })
          }))
        const readFirst = <E, R>(app: HttpApp.Default<E, R>) =>
          Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) =>
              Effect.zipRight(
                Effect.orDie(read === "text" ? Effect.asVoid(request.text) : Effect.asVoid(request.arrayBuffer)),
                app
              )
          )
        yield* serve(handler.pipe(yield* IdempotencyMiddleware.make(), readFirst))
        return {
          runs: () =>
            runs
        }
      })

    /** A POST of `hex`'s bytes, as raw bytes; the reply read whole once the server closed the connection. */
    const sent = (key: string, hex: string) =>
      rawReply(
        `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/octet-stream\r\n` +
          `Content-Length: ${hex.length / 2}\r\nConnection: close\r\n\r\n${Buffer.from(hex, "hex").toString("latin1")}`
      )
    const statusOf = (reply: string) => Number(reply.split(" ")[1])
    const bodyOf = (reply: string) => reply.slice(reply.indexOf("\r\n\r\n") + 4)

    it.scoped("read as text: a UTF-8 body's bytes are the text's, exactly (its BOM too)", () =>
      withServer(Effect.gen(function*() {
        const orders = yield* served("text")
        const utf8 = Buffer.from("\uFEFF{\"sku\":\"caf\u00e9 \u2615\"}", "utf8").toString("hex")
        const first = yield* sent("utf8", utf8)
        expect(statusOf(first)).toBe(201)
        expect(bodyOf(first)).toBe(utf8) // the handler got the bytes sent
        const again = yield* sent("utf8", utf8)
        expect(again.toLowerCase()).toContain("idempotent-replayed: true")
        expect(statusOf(yield* sent("utf8", Buffer.from("{\"sku\":\"cafe\"}").toString("hex")))).toBe(422)
        expect(orders.runs()).toBe(1)
      })))

    it.scoped("read as text: bytes that are not UTF-8 are gone, and the answer says so (500), never another's", () =>
      withServer(Effect.gen(function*() {
        const orders = yield* served("text")
        // ff01 and fe01 both decode to "\uFFFD\u0001": the text cannot tell them apart
        for (const hex of ["ff01", "fe01", "ff01"]) {
          const reply = yield* sent("binary", hex)
          expect(statusOf(reply), hex).toBe(500)
          expect(reply).toContain("application/problem+json")
          expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
        }
        expect(orders.runs()).toBe(0)
      })))

    it.scoped(
      "read before, on a request copied since (a router's prefix): 500, not a wait for the spent stream",
      () =>
        withServer(Effect.gen(function*() {
          let runs = 0
          const handler = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`, { status: 201 }))
          // between the reader and ours, a copy of the request (`request.modify`, as a router's prefix does): the copy
          // starts without the cached text
          const readFirst = <E, R>(app: HttpApp.Default<E, R>) =>
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) => Effect.zipRight(Effect.orDie(request.text), app)
            )
          const copied = <E, R>(app: HttpApp.Default<E, R>) =>
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) =>
                Effect.provideService(app, HttpServerRequest.HttpServerRequest, request.modify({ url: request.url }))
            )
          yield* serve(readFirst(copied(handler.pipe(yield* IdempotencyMiddleware.make()))))
          for (const hex of ["7b7d", "5b5d"]) {
            const reply = yield* sent("copied", hex)
            expect(statusOf(reply), hex).toBe(500)
            expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
          }
          // a request that declares no body has none to lose
          expect(statusOf(yield* sent("empty", ""))).toBe(201)
          expect(runs).toBe(1)
        })),
      20_000
    )

    it.scoped(
      "read as bytes, which a Node request does not keep: 500 at once, not a wait for the spent stream",
      () =>
        withServer(Effect.gen(function*() {
          const orders = yield* served("arrayBuffer")
          const reply = yield* sent("bytes", "ff01")
          expect(statusOf(reply)).toBe(500)
          expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
          expect(orders.runs()).toBe(0)
        })),
      20_000
    )
  })

  it.effect("the memory store never evicts a record early through entries of the record it replaced", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const request = {
        scope: "s",
        key: "k",
        fingerprint: "f",
        ttl: Duration.seconds(100),
        lease: Duration.seconds(10)
      }
      const a = yield* store.claim(request)
      yield* TestClock.adjust("1 second")
      yield* store.renew({ scope: "s", key: "k", token: (a as any).token }, Duration.seconds(10))
      yield* TestClock.adjust("1 second")
      yield* store.release({ scope: "s", key: "k", token: (a as any).token })
      yield* TestClock.adjust("1 second")
      const b = yield* store.claim(request)
      yield* TestClock.adjust("1 second")
      const response = { status: 201, headers: {}, body: new Uint8Array([1]) }
      expect(yield* store.complete({ scope: "s", key: "k", token: (b as any).token }, response, Duration.seconds(100)))
        .toBe(true)
      yield* TestClock.adjust("97 seconds") // t = 101: B's record is kept until t = 104
      expect((yield* store.claim(request))._tag).toBe("Completed")
    }))

  it("rejects bad options when built", () => {
    expect(() => IdempotencyMiddleware.make({ ttl: "30 seconds", lease: "60 seconds" })).toThrow(
      /longer than the lease/
    )
    expect(() => IdempotencyMiddleware.make({ maxKeyLength: 0 })).toThrow(/maxKeyLength/)
    expect(() => IdempotencyMiddleware.make({ lease: 0 })).toThrow(/lease/)
    expect(() => IdempotencyMiddleware.make({ ttl: -1 })).toThrow(/ttl/)
  })
})
