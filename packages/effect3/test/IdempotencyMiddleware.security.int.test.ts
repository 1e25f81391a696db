/**
 * The findings of the security review of the idempotency middleware, each as the attack or misuse that
 * showed it: forged client scopes, endpoints that replay each other's answers, unbounded storage, raw
 * credentials in stores and logs, and replays that dropped or leaked headers.
 */
import type { HttpApp } from "@effect/platform"
import { HttpClientRequest, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Deferred, Duration, Effect, Fiber, Layer, Logger, Redacted, Stream, TestClock } from "effect"
import { ClientScope, IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { Deadline, DeadlineMiddleware, RateLimitHeaders, RetryAfter, StructuredFields } from "../src/index.js"
import { asClient, post, rawStatus, send, serve, TestServer } from "./support/httpServer.js"

/** An orders endpoint whose handler counts its runs and answers what `answer(n)` says. */
const counted = (
  answer: (n: number) => Effect.Effect<HttpServerResponse.HttpServerResponse> = (n) =>
    Effect.succeed(HttpServerResponse.unsafeJson({ id: n }, { status: 201, headers: { location: `/orders/${n}` } }))
) => {
  let runs = 0
  return { handler: Effect.suspend(() => answer(++runs)), runs: () => runs }
}

/** Serves `handler` at POST /orders behind the middleware built with `options`. */
const serveOrders = (
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>,
  options?: IdempotencyMiddleware.Options
) =>
  Effect.gen(function*() {
    const idempotent = yield* IdempotencyMiddleware.make(options)
    yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", handler.pipe(idempotent))))
  })

const withServer = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(Layer.merge(TestServer, IdempotencyStore.layerMemory)))

/** A store that records the claims it sees, over a memory store. */
const spyingStore = Effect.gen(function*() {
  const memory = yield* IdempotencyStore.makeMemory()
  const claims: Array<IdempotencyStore.ClaimRequest> = []
  const store: IdempotencyStore.Store = {
    ...memory,
    claim: (request) => Effect.zipRight(Effect.sync(() => claims.push(request)), memory.claim(request))
  }
  return { store, claims }
})

/** The middleware over a store whose claims fail with `cause(request)`. */
const withFailingStore = (cause: (request: IdempotencyStore.ClaimRequest) => Error) =>
  IdempotencyMiddleware.make().pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, {
    claim: (request) =>
      Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation: "claim", cause: cause(request) })),
    complete: () => Effect.succeed(false),
    renew: () => Effect.succeed(false),
    release: () => Effect.void
  }))

/** Runs an app on a request built in memory (no server): the peer's address and headers are the test's. */
const runApp = <E>(
  app: HttpApp.Default<E, never>,
  options: {
    readonly remoteAddress?: string
    readonly key?: string
    readonly body?: string
    readonly headers?: Record<string, string>
  } = {}
) => {
  const web = new Request("http://service.test/orders", {
    method: "POST",
    headers: { "idempotency-key": options.key ?? "k", "content-type": "application/json", ...options.headers },
    body: options.body ?? "{}"
  })
  const base = HttpServerRequest.fromWeb(web)
  const request = options.remoteAddress === undefined ? base : base.modify({ remoteAddress: options.remoteAddress })
  return Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)
}

/** Collects the log lines written while `effect` runs. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  const lines: Array<string> = []
  const logger = Logger.make(({ cause, message }) => {
    const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
    lines.push(Cause.isEmpty(cause) ? text : `${text} ${Cause.pretty(cause)}`)
  })
  return Effect.map(
    effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))),
    (a) => [a, lines] as const
  )
}

describe("IdempotencyMiddleware wiring", () => {
  it("takes its store when built: the old per-request shape does not compile", () => {
    const handler = Effect.succeed(HttpServerResponse.empty())
    // @ts-expect-error make is an effect that takes the store once, not a middleware to apply per request
    expect(() => handler.pipe(IdempotencyMiddleware.make())).toThrow()
  })

  it.scoped("three POSTs with one key, wired as documented, make one order", () =>
    Effect.gen(function*() {
      const orders = counted()
      yield* serveOrders(orders.handler)
      for (let i = 0; i < 3; i++) yield* post("/orders", { key: "once", body: { sku: "A" } })
      expect(orders.runs()).toBe(1)
    }).pipe(Effect.provide(TestServer), Effect.provide(IdempotencyStore.layerMemory)))
})

describe("IdempotencyMiddleware client scopes", () => {
  it.scoped("a header naming another client takes nothing from it: no replay, no squatting", () =>
    withServer(Effect.gen(function*() {
      const orders = counted()
      yield* serveOrders(orders.handler)
      const victim = yield* post("/orders", { key: "order-1", body: { sku: "A" } })
      expect(victim.status).toBe(201)
      // another machine names the victim in every header a scope was ever read from
      const forged = { "x-api-key": "127.0.0.1", "x-forwarded-for": "127.0.0.1", forwarded: "for=127.0.0.1" }
      const attacker = yield* post("/orders", { key: "order-1", body: { sku: "A" }, headers: forged }).pipe(
        asClient("127.0.0.2")
      )
      expect(attacker.headers["idempotent-replayed"]).toBeUndefined()
      expect(attacker.headers["location"]).toBe("/orders/2") // its own order, not the victim's
      // nor can it squat the victim's keys: another body under the victim's key is the attacker's own key
      const squat = yield* post("/orders", { key: "order-2", body: { sku: "X" }, headers: forged }).pipe(
        asClient("127.0.0.2")
      )
      expect(squat.status).toBe(201)
      expect((yield* post("/orders", { key: "order-2", body: { sku: "B" } })).status).toBe(201)
      const replay = yield* post("/orders", { key: "order-1", body: { sku: "A" } })
      expect(replay.headers["location"]).toBe("/orders/1")
      expect(replay.headers["idempotent-replayed"]).toBe("true")
    })))

  it.scoped("with the principal as scope, customers never see each other's answers", () =>
    Effect.gen(function*() {
      class User extends Context.Tag("User")<User, { readonly id: string }>() {}
      // authentication runs first and provides the principal the scope reads
      const authenticate = <E, R>(app: HttpApp.Default<E, R>) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          const token = request.headers["authorization"]
          if (token === undefined) return Effect.succeed(HttpServerResponse.empty({ status: 401 }))
          return Effect.provideService(app, User, { id: token.replace("Bearer ", "") })
        })
      const orders = counted()
      const idempotent = yield* IdempotencyMiddleware.make({ scope: () => Effect.map(User, (u) => u.id) })
      yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", orders.handler.pipe(idempotent, authenticate))))
      const as = (user: string) => ({ key: "same", body: { sku: "A" }, headers: { authorization: `Bearer ${user}` } })
      const alice = yield* post("/orders", as("alice"))
      const bob = yield* post("/orders", as("bob"))
      expect(bob.headers["location"]).not.toBe(alice.headers["location"])
      expect(bob.headers["idempotent-replayed"]).toBeUndefined()
      const aliceAgain = yield* post("/orders", as("alice"))
      expect(aliceAgain.headers["location"]).toBe(alice.headers["location"])
      expect(aliceAgain.headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
    }).pipe(Effect.provide(TestServer), Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("behind one trusted proxy, the client is the address it forwarded", () =>
    withServer(Effect.gen(function*() {
      const orders = counted()
      yield* serveOrders(orders.handler, { scope: ClientScope.address({ trustedProxies: 1 }) })
      // the test client plays the proxy: one connection, the clients' addresses in X-Forwarded-For
      const from = (client: string) => ({ key: "k", headers: { "x-forwarded-for": `spoofed, ${client}` } })
      yield* post("/orders", from("198.51.100.1"))
      expect((yield* post("/orders", from("198.51.100.2"))).headers["idempotent-replayed"]).toBeUndefined()
      expect((yield* post("/orders", from("198.51.100.1"))).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
    })))

  it.effect("no client identity (no address): a 500, logged, and the handler does not run", () =>
    Effect.gen(function*() {
      const orders = counted()
      const idempotent = yield* IdempotencyMiddleware.make()
      const [response, lines] = yield* logged(runApp(orders.handler.pipe(idempotent)))
      expect(response.status).toBe(500)
      expect(orders.runs()).toBe(0)
      expect(lines.join("\n")).toMatch(/no client identity/)
      // nor an empty scope from a scope function
      const empty = yield* IdempotencyMiddleware.make({ scope: () => Effect.succeed("") })
      expect((yield* runApp(orders.handler.pipe(empty), { remoteAddress: "192.0.2.1" })).status).toBe(500)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("stores keep a fixed-size digest of the scope, keyed with scopeSecret, never the scope", () =>
    Effect.gen(function*() {
      const { claims, store } = yield* spyingStore
      const credential = `sk_live_${"x".repeat(16_000)}` // a long credential used as the scope
      const build = (options: IdempotencyMiddleware.Options) =>
        IdempotencyMiddleware.make(options).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
      const plain = yield* build({ scope: () => Effect.succeed(credential) })
      const keyed = yield* build({ scope: () => Effect.succeed(credential), scopeSecret: Redacted.make("s3cret") })
      const byAddress = yield* build({})
      const ok = Effect.succeed(HttpServerResponse.empty({ status: 204 }))
      yield* runApp(ok.pipe(plain), { remoteAddress: "192.0.2.1", key: "a" })
      yield* runApp(ok.pipe(keyed), { remoteAddress: "192.0.2.1", key: "b" })
      yield* runApp(ok.pipe(byAddress), { remoteAddress: "192.0.2.1", key: "c" })
      const scopes = claims.map((c) => c.scope)
      for (const scope of scopes) {
        expect(scope).toMatch(/^[0-9a-f]{64}$/)
        expect(scope).not.toContain("sk_live")
        expect(scope).not.toContain("192.0.2.1")
      }
      expect(new Set(scopes).size).toBe(3)
    }))
})

describe("IdempotencyMiddleware store failures", () => {
  it.effect("are answered 503 and logged once each, with the cause, without the key or the scope", () =>
    Effect.gen(function*() {
      const key = "key-4f1c9a"
      const idempotent = yield* withFailingStore((request) =>
        new Error(`duplicate (scope, key)=(${request.scope}, ${request.key}) on index too large`)
      )
      const ok = Effect.succeed(HttpServerResponse.empty({ status: 204 }))
      const [response, lines] = yield* logged(runApp(ok.pipe(idempotent), { remoteAddress: "192.0.2.1", key }))
      expect(response.status).toBe(503)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/claim/)
      expect(lines[0]).toMatch(/index too large/)
      expect(lines[0]).toContain("<key>")
      expect(lines[0]).not.toContain(key)
      expect(lines[0]).not.toMatch(/[0-9a-f]{64}/)
    }))
})

describe("IdempotencyMiddleware targets", () => {
  it.scoped("mounted endpoints do not answer each other's keys: the full target is fingerprinted", () =>
    withServer(Effect.gen(function*() {
      const v1 = counted()
      const admin = counted()
      const idempotent = yield* IdempotencyMiddleware.make()
      const inner = (handler: typeof v1.handler) => HttpRouter.empty.pipe(HttpRouter.post("/orders", handler))
      yield* serve(HttpRouter.empty.pipe(
        HttpRouter.mount("/v1", inner(v1.handler)),
        HttpRouter.mount("/admin", inner(admin.handler)),
        idempotent
      ))
      expect((yield* post("/v1/orders", { key: "k", body: { sku: "A" } })).status).toBe(201)
      const other = yield* post("/admin/orders", { key: "k", body: { sku: "A" } })
      expect(other.status).toBe(422)
      expect(admin.runs()).toBe(0)
      // the query string is part of the target too
      expect((yield* post("/v1/orders?express=1", { key: "k", body: { sku: "A" } })).status).toBe(422)
    })))
})

describe("IdempotencyMiddleware what is stored", () => {
  it.scoped("the handler's 4xx answers are stored and replayed (Stripe's rule); storeStatus can release them", () =>
    withServer(Effect.gen(function*() {
      const rejecting = counted(() =>
        Effect.succeed(HttpServerResponse.unsafeJson({ error: "card declined" }, { status: 402 }))
      )
      yield* serveOrders(rejecting.handler)
      yield* post("/orders", { key: "declined" })
      const replay = yield* post("/orders", { key: "declined" })
      expect(replay.status).toBe(402)
      expect(replay.headers["idempotent-replayed"]).toBe("true")
      expect(rejecting.runs()).toBe(1)
    })))

  it.scoped("storeStatus refusing a status releases the key: a retry runs again", () =>
    withServer(Effect.gen(function*() {
      const validating = counted((n) =>
        Effect.succeed(HttpServerResponse.text(`run ${n}`, { status: n === 1 ? 400 : 201 }))
      )
      yield* serveOrders(validating.handler, { storeStatus: (status) => status !== 400 })
      expect((yield* post("/orders", { key: "v" })).status).toBe(400)
      expect((yield* post("/orders", { key: "v" })).status).toBe(201)
      expect((yield* post("/orders", { key: "v" })).headers["idempotent-replayed"]).toBe("true")
      expect(validating.runs()).toBe(2)
    })))

  it.scoped("a handler's 429 or 503 asks the client to come back: never stored; a 500 is", () =>
    withServer(Effect.gen(function*() {
      const statuses = [429, 503, 500]
      const busy = counted((n) =>
        Effect.succeed(
          HttpServerResponse.text("busy", { status: statuses[n - 1] ?? 201, headers: { "retry-after": "3" } })
        )
      )
      yield* serveOrders(busy.handler)
      expect((yield* post("/orders", { key: "b" })).status).toBe(429)
      expect((yield* post("/orders", { key: "b" })).status).toBe(503)
      expect((yield* post("/orders", { key: "b" })).status).toBe(500)
      const replay = yield* post("/orders", { key: "b" })
      expect(replay.status).toBe(500)
      expect(replay.headers["idempotent-replayed"]).toBe("true")
      expect(busy.runs()).toBe(3)
    })))

  it.scoped("replays the allow-listed headers (Cache-Control, Retry-After, RateLimit, ...), never Set-Cookie", () =>
    withServer(Effect.gen(function*() {
      const orders = counted(() =>
        Effect.succeed(
          HttpServerResponse.text("created", {
            status: 201,
            headers: {
              "cache-control": "no-store",
              "content-encoding": "identity",
              "content-language": "fr",
              "retry-after": "5",
              ratelimit: "\"default\";r=3;t=10",
              "ratelimit-policy": "\"default\";q=10;w=10",
              "x-trace": "abc",
              "x-tenant": "t1"
            }
          }).pipe(HttpServerResponse.unsafeSetCookie("session", "secret"))
        )
      )
      yield* serveOrders(orders.handler, { replayHeaders: ["X-Tenant"] })
      const first = yield* post("/orders", { key: "h" })
      const replay = yield* post("/orders", { key: "h" })
      expect(first.headers["set-cookie"]).toContain("session=secret")
      const replayed = ["cache-control", "content-encoding", "content-language", "retry-after", "ratelimit"]
      for (const name of [...replayed, "ratelimit-policy"]) {
        expect(replay.headers[name], name).toBe(first.headers[name])
      }
      expect(replay.headers["x-tenant"]).toBe("t1")
      expect(replay.headers["x-trace"]).toBeUndefined()
      expect(replay.headers["set-cookie"]).toBeUndefined()
      expect(() => IdempotencyMiddleware.make({ replayHeaders: ["Set-Cookie"] })).toThrow(/Set-Cookie/)
    })))

  it.scoped("a body over maxResponseBytes is answered in full, replayed without it, and both say so", () =>
    withServer(Effect.gen(function*() {
      const big = "x".repeat(100)
      const orders = counted((n) =>
        Effect.succeed(
          n === 1
            ? HttpServerResponse.text(big, { status: 201, headers: { location: "/orders/1" } })
            : HttpServerResponse.stream(Stream.make(new TextEncoder().encode(big)), { status: 201 })
        )
      )
      yield* serveOrders(orders.handler, { maxResponseBytes: 10 })
      for (const key of ["plain", "streamed"]) {
        const first = yield* post("/orders", { key })
        expect(first.body).toBe(big)
        expect(first.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
        const replay = yield* post("/orders", { key })
        expect(replay.status).toBe(201)
        expect(replay.body).toBe("")
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(replay.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
      }
      expect(orders.runs()).toBe(2)
    })))
})

describe("IdempotencyMiddleware bounded memory store", () => {
  it.scoped("full of live records: 503 for a new key, the records it holds still answered, room after expiry", () =>
    Effect.gen(function*() {
      const orders = counted()
      yield* serveOrders(orders.handler, { ttl: "1 hour" })
      expect((yield* post("/orders", { key: "a" })).status).toBe(201)
      expect((yield* post("/orders", { key: "b" })).status).toBe(201)
      const refused = yield* post("/orders", { key: "c" })
      expect(refused.status).toBe(503)
      expect(JSON.parse(refused.body).type).toContain("idempotency-store-full")
      expect(refused.headers["retry-after"]).toBe("60")
      expect((yield* post("/orders", { key: "a" })).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
      yield* TestClock.adjust("1 hour")
      expect((yield* post("/orders", { key: "c" })).status).toBe(201)
    }).pipe(
      Effect.provide(TestServer),
      // one scope here (every request comes from this machine): the store's bound, not the scope's
      Effect.provide(IdempotencyStore.layerMemoryWith({ maxRecords: 2, maxRecordsPerScope: 2 }))
    ))

  it.scoped("one client at its maxRecordsPerScope gets 503 for a new key; other clients keep claiming", () =>
    Effect.gen(function*() {
      const orders = counted()
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => logs.push(String(message)))
      yield* serveOrders(orders.handler, {
        ttl: "1 hour",
        scope: (request) => Effect.succeed(request.headers["x-client"] ?? "anonymous")
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      const as = (client: string, key: string) => post("/orders", { key, headers: { "x-client": client } })
      // the greedy client fills its share of the store: 10 records of 100 at the default tenth
      for (let i = 0; i < 10; i++) expect((yield* as("greedy", `g${i}`)).status).toBe(201)
      const refused = yield* as("greedy", "g10")
      expect(refused.status).toBe(503)
      expect(JSON.parse(refused.body).type).toContain("idempotency-store-full")
      expect(refused.headers["retry-after"]).toBe("60")
      expect(logs.some((line) => line.includes("full for one scope: 10 live records"))).toBe(true)
      // its held keys still replay; the others' new keys are claimed as if it were not there
      expect((yield* as("greedy", "g0")).headers["idempotent-replayed"]).toBe("true")
      for (const client of ["modest-1", "modest-2"]) {
        for (let i = 0; i < 10; i++) expect((yield* as(client, `m${i}`)).status).toBe(201)
        expect((yield* as(client, "m10")).status).toBe(503)
      }
      expect(orders.runs()).toBe(30)
      // its records expire: room again for it
      yield* TestClock.adjust("1 hour")
      expect((yield* as("greedy", "g10")).status).toBe(201)
    }).pipe(Effect.provide(TestServer), Effect.provide(IdempotencyStore.layerMemoryWith({ maxRecords: 100 }))))

  it.effect("the store itself: a new key fails with IdempotencyStoreFull; held keys and takeovers need no room", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 1 })
      const request = (key: string): IdempotencyStore.ClaimRequest => ({
        scope: "s",
        key,
        fingerprint: "f",
        ttl: Duration.hours(1),
        lease: Duration.seconds(10)
      })
      expect((yield* store.claim(request("a")))._tag).toBe("Claimed")
      const full = yield* Effect.flip(store.claim(request("b")))
      expect(full).toBeInstanceOf(IdempotencyStore.IdempotencyStoreFull)
      // the held key is still answered; its owner died (lease over): taken over in place, no room needed
      expect((yield* store.claim(request("a")))._tag).toBe("InProgress")
      yield* TestClock.adjust("10 seconds")
      expect((yield* store.claim(request("a")))._tag).toBe("Claimed")
      expect(yield* store.size).toBe(1)
      expect(() => IdempotencyStore.makeMemory({ maxRecords: 0 })).toThrow(/maxRecords/)
    }))

  it.effect("the store itself: a scope's cap counts its live records, whatever ends them", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 5, maxRecordsPerScope: 2 })
      const request = (scope: string, key: string, ttl = Duration.hours(1)): IdempotencyStore.ClaimRequest => ({
        scope,
        key,
        fingerprint: "f",
        ttl,
        lease: Duration.seconds(10)
      })
      const claimed = (scope: string, key: string, ttl?: Duration.Duration) =>
        Effect.map(store.claim(request(scope, key, ttl)), (r) => r._tag === "Claimed" ? r.token : r._tag)
      const a1 = yield* claimed("a", "1")
      yield* claimed("a", "2", Duration.minutes(1))
      const full = yield* Effect.flip(store.claim(request("a", "3")))
      expect(full).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 2, perScope: true })
      expect(full.message).toContain("maxRecordsPerScope")
      // other scopes are not refused; a takeover of a held key needs no room
      expect(yield* claimed("b", "1")).toMatch(/^m/)
      yield* TestClock.adjust("10 seconds")
      const taken = yield* claimed("a", "1")
      expect(taken).toMatch(/^m/)
      expect((yield* Effect.flip(store.claim(request("a", "3"))))._tag).toBe("IdempotencyStoreFull")
      // the old token releases nothing (the takeover owns the key); the owner's release frees a place
      yield* store.release({ scope: "a", key: "1", token: a1 })
      expect((yield* Effect.flip(store.claim(request("a", "3"))))._tag).toBe("IdempotencyStoreFull")
      yield* store.release({ scope: "a", key: "1", token: taken })
      expect(yield* claimed("a", "3")).toMatch(/^m/)
      expect((yield* Effect.flip(store.claim(request("a", "4"))))._tag).toBe("IdempotencyStoreFull")
      // so does an expiry
      yield* TestClock.adjust("1 minute")
      expect(yield* claimed("a", "4")).toMatch(/^m/)
      expect(yield* store.size).toBe(3)
      // the store's own bound comes first: a full store refuses every scope alike
      yield* claimed("c", "1")
      yield* claimed("c", "2")
      const storeFull = yield* Effect.flip(store.claim(request("d", "1")))
      expect(storeFull).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 5 })
      expect("perScope" in storeFull && storeFull.perScope).toBeFalsy()
      expect(() => IdempotencyStore.makeMemory({ maxRecordsPerScope: 0 })).toThrow(/maxRecordsPerScope/)
      expect(() => IdempotencyStore.makeMemory({ maxRecordsPerScope: 1.5 })).toThrow(/maxRecordsPerScope/)
    }))
})

describe("IdempotencyMiddleware what held up, kept so", () => {
  it.scoped("a Content-Length over the limit is refused before the body is read, and claims nothing", () =>
    withServer(Effect.gen(function*() {
      const orders = counted()
      yield* serveOrders(orders.handler, { maxBodyBytes: 100 })
      // declares a gigabyte, sends two bytes: answered at once, without waiting for the rest
      const lying = yield* rawStatus(
        "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: liar\r\nContent-Length: 1000000000\r\n" +
          "Connection: close\r\n\r\n{}"
      )
      expect(lying).toBe(413)
      // the key was not claimed: the honest request with it runs
      expect((yield* post("/orders", { key: "liar" })).status).toBe(201)
      expect(orders.runs()).toBe(1)
    })))

  it.scoped("its problem+json bodies say what happened, never the internals behind it", () =>
    Effect.gen(function*() {
      const idempotent = yield* withFailingStore(() => new Error("connect ECONNREFUSED 10.1.2.3:5432 password=hunter2"))
      yield* serve(HttpRouter.empty.pipe(HttpRouter.post("/orders", counted().handler.pipe(idempotent))))
      const reply = yield* post("/orders", { key: "k" })
      expect(reply.status).toBe(503)
      expect(reply.headers["content-type"]).toBe("application/problem+json")
      expect(JSON.parse(reply.body)).toMatchObject({ status: 503, title: "Idempotency store unavailable" })
      for (const secret of ["ECONNREFUSED", "10.1.2.3", "hunter2", "claim failed"]) {
        expect(reply.body).not.toContain(secret)
      }
    }).pipe(Effect.provide(TestServer)))

  it("header parsers stay linear on 1.6 MB of hostile input", () => {
    const huge = (unit: string) => unit.repeat(Math.ceil(1_600_000 / unit.length))
    for (const input of [huge("\"\\"), huge("a"), `"${huge("\\\"")}`, huge(", "), huge(";q=1")]) {
      StructuredFields.parseIdempotencyKey(input, { maxLength: 255 })
      RetryAfter.parse(input, 0)
      RateLimitHeaders.parsePolicy(input)
      RateLimitHeaders.parseRateLimit(input)
      DeadlineMiddleware.parseHeader(input)
      Effect.runSync(Effect.either(
        ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })(
          HttpServerRequest.fromWeb(
            new Request("http://x/", { headers: { forwarded: input.replace(/[^\x20-\x7e]/g, "") } })
          )
            .modify({ remoteAddress: "10.0.0.1" })
        )
      ))
    }
  }, 30_000)
})

describe("IdempotencyMiddleware admitted handlers", () => {
  it.effect("a client's short deadline does not reach into the handler: no typed failure after the commit", () =>
    Effect.gen(function*() {
      let commits = 0
      // commits, then makes a deadline-aware call (e.g. to a downstream service) that takes 300 ms
      const handler = Effect.gen(function*() {
        const n = ++commits
        yield* Effect.sleep("300 millis").pipe(Deadline.timeout("5 seconds"))
        return HttpServerResponse.unsafeJson({ order: n }, { status: 201 })
      })
      const idempotent = yield* IdempotencyMiddleware.make()
      const app = handler.pipe(idempotent, DeadlineMiddleware.make())
      const first = yield* Effect.fork(
        runApp(app, { remoteAddress: "192.0.2.1", key: "d", headers: { "request-timeout-ms": "50" } })
      )
      yield* TestClock.adjust("50 millis")
      expect((yield* first).status).toBe(504)
      yield* TestClock.adjust("250 millis")
      const retry = yield* runApp(app, { remoteAddress: "192.0.2.1", key: "d" })
      expect(retry.status).toBe(201)
      expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      expect(commits).toBe(1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("the lease is renewed until the answer is stored, a slow streamed body included", () =>
    Effect.gen(function*() {
      let runs = 0
      const slowBody = Stream.fromEffect(Effect.as(Effect.sleep("120 seconds"), new TextEncoder().encode("done")))
      const handler = Effect.sync(() => {
        runs++
        return HttpServerResponse.stream(slowBody, { status: 201 })
      })
      const idempotent = yield* IdempotencyMiddleware.make({ lease: "60 seconds" })
      const app = handler.pipe(idempotent)
      const first = yield* Effect.fork(runApp(app, { remoteAddress: "192.0.2.1", key: "slow" }))
      yield* TestClock.adjust("61 seconds")
      expect((yield* runApp(app, { remoteAddress: "192.0.2.1", key: "slow" })).status).toBe(409)
      yield* TestClock.adjust("60 seconds")
      expect((yield* first).status).toBe(201)
      const replay = yield* runApp(app, { remoteAddress: "192.0.2.1", key: "slow" })
      expect(replay.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      expect(runs).toBe(1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a failure after the handler returned (its body, storeStatus) is its defect: stored as a 500", () =>
    Effect.gen(function*() {
      let runs = 0
      const handler = Effect.sync(() => {
        runs++
        return HttpServerResponse.stream(Stream.fail("the body broke"), { status: 201 })
      })
      const idempotent = yield* IdempotencyMiddleware.make()
      const app = handler.pipe(idempotent)
      const first = yield* Effect.exit(runApp(app, { remoteAddress: "192.0.2.1", key: "broken" }))
      expect(first._tag).toBe("Failure")
      const retry = yield* runApp(app, { remoteAddress: "192.0.2.1", key: "broken" })
      expect(retry.status).toBe(500)
      expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      const throwing = yield* IdempotencyMiddleware.make({
        storeStatus: () => {
          throw new Error("bug in storeStatus")
        }
      })
      const ok = Effect.sync(() => {
        runs++
        return HttpServerResponse.text("ok", { status: 201 })
      })
      yield* Effect.exit(runApp(ok.pipe(throwing), { remoteAddress: "192.0.2.1", key: "throws" }))
      expect((yield* runApp(ok.pipe(throwing), { remoteAddress: "192.0.2.1", key: "throws" })).status).toBe(500)
      expect(runs).toBe(2)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a handler that fails after its client left says so in the log (without the key)", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const handler = Deferred.succeed(entered, undefined).pipe(
        Effect.zipRight(Deferred.await(gate)),
        Effect.zipRight(Effect.die(new Error("boom after the client left")))
      )
      const idempotent = yield* IdempotencyMiddleware.make()
      const [, lines] = yield* logged(Effect.gen(function*() {
        const waiting = yield* Effect.fork(runApp(handler.pipe(idempotent), { remoteAddress: "192.0.2.1", key: "k-9" }))
        yield* Deferred.await(entered)
        yield* Fiber.interrupt(waiting)
        yield* Deferred.succeed(gate, undefined)
        // the handler's fiber logs when it ends: let it run
        yield* Effect.repeatN(Effect.yieldNow(), 100)
      }))
      const text = lines.join("\n")
      expect(text).toMatch(/client had gone/)
      expect(text).toMatch(/boom after the client left/)
      expect(text).not.toContain("k-9")
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("multipart bodies reach the handler, parsed from the bytes the middleware read", () =>
    withServer(Effect.gen(function*() {
      const handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(
          Stream.runCollect(request.multipartStream),
          (parts) => HttpServerResponse.text([...parts].map((part) => part.key).join(","), { status: 201 })
        )).pipe(Effect.orDie)
      yield* serveOrders(handler)
      const boundary = "----boundary7MA4YWxk"
      const field = (name: string, value: string) =>
        `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
      const body = `${field("sku", "A")}${field("qty", "2")}--${boundary}--\r\n`
      const reply = yield* send(
        HttpClientRequest.post("/orders").pipe(
          HttpClientRequest.setHeader("idempotency-key", "multi"),
          HttpClientRequest.bodyText(body, `multipart/form-data; boundary=${boundary}`)
        )
      )
      expect(reply.status).toBe(201)
      expect(reply.body).toBe("sku,qty")
    })))
})

describe("IdempotencyStore memory bounds", () => {
  it.effect("released records and renewals do not grow its expiry heap past its records", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 10 })
      const pending = (store as unknown as { pendingExpiries: () => number }).pendingExpiries
      const request = (key: string): IdempotencyStore.ClaimRequest => ({
        scope: "s",
        key,
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      for (let i = 0; i < 20_000; i++) {
        const claim = yield* store.claim(request(`k${i}`))
        if (claim._tag !== "Claimed") return yield* Effect.die("expected a claim")
        const ref = { scope: "s", key: `k${i}`, token: claim.token }
        yield* store.renew(ref, Duration.seconds(60))
        yield* store.release(ref)
      }
      expect(yield* store.size).toBe(0)
      expect(pending()).toBeLessThanOrEqual(2 * 0 + 1_024 + 1)
    }))
})
