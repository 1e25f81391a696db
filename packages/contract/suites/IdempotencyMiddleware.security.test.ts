/**
 * The findings of the security review, each as the attack or misuse that showed it (forged client scopes, endpoints that replay each other's
 * answers, unbounded storage, raw credentials in stores and logs, replays that dropped or leaked headers). The
 * cases run over the in-memory server (./support/idempotencyServer.ts); those where the socket is the point (the
 * connection's own address, a lying Content-Length, the documented wiring) are in
 * IdempotencyMiddleware.security.int.test.ts, and the memory store's own bounds in IdempotencyStore.test.ts.
 */
import {
  captureLogsWithCause,
  fork,
  HttpServerRequest,
  HttpServerResponse,
  jsonResponse,
  mountedOrders,
  recordingSleeps,
  scoped,
  serverRequestFrom,
  ServiceKey,
  setCookie,
  TestClock,
  untilSleeping,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Redacted, Stream } from "effect"
import { ClientScope, Deadline, DeadlineMiddleware, IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import { RateLimitHeaders, RetryAfter, StructuredFields } from "effect-resilience"
import { requestOf, type Send, serve } from "./support/idempotencyServer.js"

type Response = HttpServerResponse.HttpServerResponse

/** An orders endpoint whose handler counts its runs and answers what `answer(n)` says. */
const counted = (
  answer: (n: number) => Effect.Effect<Response> = (n) =>
    Effect.succeed(jsonResponse({ id: n }, { status: 201, headers: { location: `/orders/${n}` } }))
) => {
  let runs = 0
  return { handler: Effect.suspend(() => answer(++runs)), runs: () => runs }
}

/** Serves `handler` behind the middleware built with `options`; the returned function POSTs to /orders. */
const serveOrders = (
  handler: Effect.Effect<Response, never, HttpServerRequest.HttpServerRequest>,
  options?: IdempotencyMiddleware.Options
) =>
  Effect.gen(function*() {
    const send = yield* serve(handler.pipe(yield* IdempotencyMiddleware.make(options)))
    return (init: Send = {}) => send({ path: "/orders", method: "POST", ...init })
  })

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

/** A store that records the claims it sees, over a memory store. */
const spyingStore = Effect.gen(function*() {
  const memory = yield* IdempotencyStore.makeMemory()
  const claims: Array<IdempotencyStore.ClaimRequest> = []
  const store: IdempotencyStore.Store = {
    ...memory,
    claim: (request) => Effect.andThen(Effect.sync(() => claims.push(request)), memory.claim(request))
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

/**
 * Runs an app on a request built in memory, in the caller's fiber (no server): the peer's address (192.0.2.1
 * unless `from` says otherwise) and headers are the test's, and the app's failures are the caller's.
 */
const runApp = <E, R>(app: Effect.Effect<Response, E, R>, init: Send = {}) =>
  Effect.provideService(
    app,
    HttpServerRequest.HttpServerRequest,
    requestOf({ path: "/orders", method: "POST", key: "k", from: "192.0.2.1", ...init })
  )

/** Collects the log lines (message and cause) written while `effect` runs. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  const { layer, lines } = captureLogsWithCause()
  return Effect.map(effect.pipe(Effect.provide(layer)), (a) => [a, lines] as const)
}

describe("IdempotencyMiddleware wiring", () => {
  it("takes its store when built: the old per-request shape does not compile", () => {
    const handler = Effect.succeed(HttpServerResponse.empty())
    // @ts-expect-error make is an effect that takes the store once, not a middleware to apply per request
    expect(() => handler.pipe(IdempotencyMiddleware.make())).toThrow()
  })
})

describe("IdempotencyMiddleware client scopes", () => {
  scoped(
    "with the principal as scope, customers never see each other's answers",
    () =>
      withStore(Effect.gen(function*() {
        class User extends ServiceKey<User, { readonly id: string }>()("User") {}
        // authentication runs first and provides the principal the scope reads
        const authenticate = <E, R>(app: Effect.Effect<Response, E, R>) =>
          Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
            const token = request.headers["authorization"]
            if (token === undefined) return Effect.succeed(HttpServerResponse.empty({ status: 401 }))
            return Effect.provideService(app, User, { id: token.replace("Bearer ", "") })
          })
        const orders = counted()
        const idempotent = yield* IdempotencyMiddleware.make({ scope: () => Effect.map(User, (u) => u.id) })
        const send = yield* serve(orders.handler.pipe(idempotent, authenticate))
        const as = (user: string) =>
          send({ key: "same", body: { sku: "A" }, headers: { authorization: `Bearer ${user}` } })
        const alice = yield* as("alice")
        const bob = yield* as("bob")
        expect(bob.headers["location"]).not.toBe(alice.headers["location"])
        expect(bob.headers["idempotent-replayed"]).toBeUndefined()
        const aliceAgain = yield* as("alice")
        expect(aliceAgain.headers["location"]).toBe(alice.headers["location"])
        expect(aliceAgain.headers["idempotent-replayed"]).toBe("true")
        expect(orders.runs()).toBe(2)
      }))
  )

  scoped("behind one trusted proxy, the client is the address it forwarded", () =>
    withStore(Effect.gen(function*() {
      const orders = counted()
      const post = yield* serveOrders(orders.handler, { scope: ClientScope.address({ trustedProxies: 1 }) })
      // the test client plays the proxy: one address, the clients' addresses in X-Forwarded-For
      const from = (client: string) => post({ key: "k", headers: { "x-forwarded-for": `spoofed, ${client}` } })
      yield* from("198.51.100.1")
      expect((yield* from("198.51.100.2")).headers["idempotent-replayed"]).toBeUndefined()
      expect((yield* from("198.51.100.1")).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
    })))

  scoped(
    "no client identity (no address): a 500, logged, and the handler does not run",
    () =>
      withStore(Effect.gen(function*() {
        const orders = counted()
        const idempotent = yield* IdempotencyMiddleware.make()
        const [response, lines] = yield* logged(runApp(orders.handler.pipe(idempotent), { from: null }))
        expect(response.status).toBe(500)
        expect(orders.runs()).toBe(0)
        expect(lines.join("\n")).toMatch(/no client identity/)
        // nor an empty scope from a scope function
        const empty = yield* IdempotencyMiddleware.make({ scope: () => Effect.succeed("") })
        expect((yield* runApp(orders.handler.pipe(empty))).status).toBe(500)
      }))
  )

  scoped(
    "stores keep a fixed-size digest of the scope, keyed with scopeSecret, never the scope",
    () =>
      Effect.gen(function*() {
        const { claims, store } = yield* spyingStore
        const credential = `sk_live_${"x".repeat(16_000)}` // a long credential used as the scope
        const build = (options: IdempotencyMiddleware.Options) =>
          IdempotencyMiddleware.make(options).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
        const plain = yield* build({ scope: () => Effect.succeed(credential) })
        const keyed = yield* build({ scope: () => Effect.succeed(credential), scopeSecret: Redacted.make("s3cret") })
        const byAddress = yield* build({})
        const ok = Effect.succeed(HttpServerResponse.empty({ status: 204 }))
        yield* runApp(ok.pipe(plain), { key: "a" })
        yield* runApp(ok.pipe(keyed), { key: "b" })
        yield* runApp(ok.pipe(byAddress), { key: "c" })
        const scopes = claims.map((c) => c.scope)
        for (const scope of scopes) {
          expect(scope).toMatch(/^[0-9a-f]{64}$/)
          expect(scope).not.toContain("sk_live")
          expect(scope).not.toContain("192.0.2.1")
        }
        expect(new Set(scopes).size).toBe(3)
      })
  )
})

describe("IdempotencyMiddleware store failures", () => {
  scoped(
    "are answered 503 and logged once each, with the cause, without the key or the scope",
    () =>
      Effect.gen(function*() {
        const key = "key-4f1c9a"
        const idempotent = yield* withFailingStore((request) =>
          new Error(`duplicate (scope, key)=(${request.scope}, ${request.key}) on index too large`)
        )
        const ok = Effect.succeed(HttpServerResponse.empty({ status: 204 }))
        const [response, lines] = yield* logged(runApp(ok.pipe(idempotent), { key }))
        expect(response.status).toBe(503)
        expect(lines).toHaveLength(1)
        expect(lines[0]).toMatch(/claim/)
        expect(lines[0]).toMatch(/index too large/)
        expect(lines[0]).toContain("<key>")
        expect(lines[0]).not.toContain(key)
        expect(lines[0]).not.toMatch(/[0-9a-f]{64}/)
      })
  )
})

describe("IdempotencyMiddleware targets", () => {
  scoped(
    "mounted endpoints do not answer each other's keys: the full target is fingerprinted",
    () =>
      Effect.gen(function*() {
        // around the whole router (as the Effect 3 test has it), and inside each prefixed route, where the URL the
        // middleware reads has lost its prefix: both handlers are /orders under theirs
        for (const placement of ["around the router", "inside each route"] as const) {
          const v1 = counted()
          const admin = counted()
          // a store of its own for each placement
          const idempotent = yield* IdempotencyMiddleware.make().pipe(Effect.provide(IdempotencyStore.layerMemory))
          const inside = placement === "inside each route"
          const router = yield* mountedOrders([
            ["/v1", inside ? v1.handler.pipe(idempotent) : v1.handler],
            ["/admin", inside ? admin.handler.pipe(idempotent) : admin.handler]
          ])
          const send = yield* serve(inside ? router : router.pipe(idempotent))
          const post = (path: string) => send({ path, method: "POST", key: "k", body: { sku: "A" } })
          expect((yield* post("/v1/orders")).status, placement).toBe(201)
          const other = yield* post("/admin/orders")
          expect(other.status, placement).toBe(422)
          expect(admin.runs(), placement).toBe(0)
          // the query string is part of the target too
          expect((yield* post("/v1/orders?express=1")).status, placement).toBe(422)
          expect(v1.runs(), placement).toBe(1)
        }
      })
  )
})

describe("IdempotencyMiddleware what is stored", () => {
  scoped(
    "the handler's 4xx answers are stored and replayed (Stripe's rule); storeStatus can release them",
    () =>
      withStore(Effect.gen(function*() {
        const rejecting = counted(() => Effect.succeed(jsonResponse({ error: "card declined" }, { status: 402 })))
        const post = yield* serveOrders(rejecting.handler)
        yield* post({ key: "declined" })
        const replay = yield* post({ key: "declined" })
        expect(replay.status).toBe(402)
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(rejecting.runs()).toBe(1)
      }))
  )

  scoped("storeStatus refusing a status releases the key: a retry runs again", () =>
    withStore(Effect.gen(function*() {
      const validating = counted((n) =>
        Effect.succeed(HttpServerResponse.text(`run ${n}`, { status: n === 1 ? 400 : 201 }))
      )
      const post = yield* serveOrders(validating.handler, { storeStatus: (status) => status !== 400 })
      expect((yield* post({ key: "v" })).status).toBe(400)
      expect((yield* post({ key: "v" })).status).toBe(201)
      expect((yield* post({ key: "v" })).headers["idempotent-replayed"]).toBe("true")
      expect(validating.runs()).toBe(2)
    })))

  scoped(
    "a handler's 429 or 503 asks the client to come back: never stored; a 500 is",
    () =>
      withStore(Effect.gen(function*() {
        const statuses = [429, 503, 500]
        const busy = counted((n) =>
          Effect.succeed(
            HttpServerResponse.text("busy", { status: statuses[n - 1] ?? 201, headers: { "retry-after": "3" } })
          )
        )
        const post = yield* serveOrders(busy.handler)
        expect((yield* post({ key: "b" })).status).toBe(429)
        expect((yield* post({ key: "b" })).status).toBe(503)
        expect((yield* post({ key: "b" })).status).toBe(500)
        const replay = yield* post({ key: "b" })
        expect(replay.status).toBe(500)
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(busy.runs()).toBe(3)
      }))
  )

  scoped(
    "replays the allow-listed headers (Cache-Control, Retry-After, RateLimit, ...), never Set-Cookie",
    () =>
      withStore(Effect.gen(function*() {
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
            }).pipe(setCookie("session", "secret"))
          )
        )
        const post = yield* serveOrders(orders.handler, { replayHeaders: ["X-Tenant"] })
        const first = yield* post({ key: "h" })
        const replay = yield* post({ key: "h" })
        expect(first.headers["set-cookie"]).toContain("session=secret")
        const replayed = ["cache-control", "content-encoding", "content-language", "retry-after", "ratelimit"]
        for (const name of [...replayed, "ratelimit-policy"]) {
          expect(replay.headers[name], name).toBe(first.headers[name])
        }
        expect(replay.headers["x-tenant"]).toBe("t1")
        expect(replay.headers["x-trace"]).toBeUndefined()
        expect(replay.headers["set-cookie"]).toBeUndefined()
        expect(() => IdempotencyMiddleware.make({ replayHeaders: ["Set-Cookie"] })).toThrow(/Set-Cookie/)
      }))
  )

  scoped(
    "a body over maxResponseBytes is answered in full, replayed without it, and both say so",
    () =>
      withStore(Effect.gen(function*() {
        const big = "x".repeat(100)
        const orders = counted((n) =>
          Effect.succeed(
            n === 1
              ? HttpServerResponse.text(big, { status: 201, headers: { location: "/orders/1" } })
              : HttpServerResponse.stream(Stream.make(new TextEncoder().encode(big)), { status: 201 })
          )
        )
        const post = yield* serveOrders(orders.handler, { maxResponseBytes: 10 })
        for (const key of ["plain", "streamed"]) {
          const first = yield* post({ key })
          expect(first.body).toBe(big)
          expect(first.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
          const replay = yield* post({ key })
          expect(replay.status).toBe(201)
          expect(replay.body).toBe("")
          expect(replay.headers["idempotent-replayed"]).toBe("true")
          expect(replay.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
        }
        expect(orders.runs()).toBe(2)
      }))
  )
})

describe("IdempotencyMiddleware bounded memory store", () => {
  scoped(
    "full of live records: 503 for a new key, the records it holds still answered, room after expiry",
    () =>
      Effect.gen(function*() {
        const orders = counted()
        const post = yield* serveOrders(orders.handler, { ttl: "1 hour" })
        expect((yield* post({ key: "a" })).status).toBe(201)
        expect((yield* post({ key: "b" })).status).toBe(201)
        const refused = yield* post({ key: "c" })
        expect(refused.status).toBe(503)
        expect(JSON.parse(refused.body).type).toContain("idempotency-store-full")
        expect(refused.headers["retry-after"]).toBe("60")
        expect((yield* post({ key: "a" })).headers["idempotent-replayed"]).toBe("true")
        expect(orders.runs()).toBe(2)
        yield* TestClock.adjust("1 hour")
        expect((yield* post({ key: "c" })).status).toBe(201)
      }).pipe(
        // one scope here (every request comes from one address): the store's bound, not the scope's
        Effect.provide(IdempotencyStore.layerMemoryWith({ maxRecords: 2, maxRecordsPerScope: 2 }))
      )
  )

  scoped(
    "one client at its maxRecordsPerScope gets 503 for a new key; other clients keep claiming",
    () =>
      Effect.gen(function*() {
        const orders = counted()
        const [, logs] = yield* logged(Effect.gen(function*() {
          const post = yield* serveOrders(orders.handler, {
            ttl: "1 hour",
            scope: (request) => Effect.succeed(request.headers["x-client"] ?? "anonymous")
          })
          const as = (client: string, key: string) => post({ key, headers: { "x-client": client } })
          // the greedy client fills its share of the store: 10 records of 100 at the default tenth
          for (let i = 0; i < 10; i++) expect((yield* as("greedy", `g${i}`)).status).toBe(201)
          const refused = yield* as("greedy", "g10")
          expect(refused.status).toBe(503)
          expect(JSON.parse(refused.body).type).toContain("idempotency-store-full")
          expect(refused.headers["retry-after"]).toBe("60")
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
        }))
        expect(logs.some((line) => line.includes("full for one scope: 10 live records"))).toBe(true)
      }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ maxRecords: 100 })))
  )
})

describe("IdempotencyMiddleware what held up, kept so", () => {
  scoped("its problem+json bodies say what happened, never the internals behind it", () =>
    Effect.gen(function*() {
      const idempotent = yield* withFailingStore(() => new Error("connect ECONNREFUSED 10.1.2.3:5432 password=hunter2"))
      const send = yield* serve(counted().handler.pipe(idempotent))
      const reply = yield* send({ path: "/orders", key: "k" })
      expect(reply.status).toBe(503)
      expect(reply.headers["content-type"]).toBe("application/problem+json")
      expect(JSON.parse(reply.body)).toMatchObject({ status: 503, title: "Idempotency store unavailable" })
      for (const secret of ["ECONNREFUSED", "10.1.2.3", "hunter2", "claim failed"]) {
        expect(reply.body).not.toContain(secret)
      }
    }))

  it("header parsers stay linear on 1.6 MB of hostile input", () => {
    const huge = (unit: string) => unit.repeat(Math.ceil(1_600_000 / unit.length))
    for (const input of [huge("\"\\"), huge("a"), `"${huge("\\\"")}`, huge(", "), huge(";q=1")]) {
      StructuredFields.parseIdempotencyKey(input, { maxLength: 255 })
      RetryAfter.parse(input, 0)
      RateLimitHeaders.parsePolicy(input)
      RateLimitHeaders.parseRateLimit(input)
      DeadlineMiddleware.parseHeader(input)
      Effect.runSync(Effect.exit(
        ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })(
          serverRequestFrom(
            new Request("http://x/", { headers: { forwarded: input.replace(/[^\x20-\x7e]/g, "") } }),
            "10.0.0.1"
          )
        )
      ))
    }
  }, 30_000)
})

describe("IdempotencyMiddleware admitted handlers", () => {
  scoped(
    "a client's short deadline does not reach into the handler: no typed failure after the commit",
    () =>
      withStore(Effect.gen(function*() {
        let commits = 0
        // commits, then makes a deadline-aware call (e.g. to a downstream service) that takes 300 ms
        const handler = Effect.gen(function*() {
          const n = ++commits
          yield* Effect.sleep("300 millis").pipe(Deadline.timeout("5 seconds"))
          return jsonResponse({ order: n }, { status: 201 })
        })
        const idempotent = yield* IdempotencyMiddleware.make()
        const send = yield* serve(handler.pipe(idempotent, DeadlineMiddleware.make()))
        const first = yield* fork(send({ key: "d", headers: { "request-timeout-ms": "50" } }))
        yield* TestClock.adjust("50 millis")
        expect((yield* Fiber.join(first)).status).toBe(504)
        yield* TestClock.adjust("250 millis")
        const retry = yield* send({ key: "d" })
        expect(retry.status).toBe(201)
        expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
        expect(commits).toBe(1)
      }))
  )

  scoped(
    "the lease is renewed until the answer is stored, a slow streamed body included",
    () =>
      withStore(recordingSleeps(Effect.gen(function*() {
        let runs = 0
        const slowBody = Stream.fromEffect(Effect.as(Effect.sleep("120 seconds"), new TextEncoder().encode("done")))
        const handler = Effect.sync(() => {
          runs++
          return HttpServerResponse.stream(slowBody, { status: 201 })
        })
        const idempotent = yield* IdempotencyMiddleware.make({ lease: "60 seconds" })
        const app = handler.pipe(idempotent)
        const first = yield* fork(runApp(app, { key: "slow" }))
        // Effect 4's TestClock.adjust waits one scheduler turn before it moves: wait for the lease's first renewal
        // to be due (lease / 3), or the clock passes 61 s before the heartbeat sleeps and the key is taken over
        yield* untilSleeping(20_000)
        yield* TestClock.adjust("61 seconds")
        expect((yield* runApp(app, { key: "slow" })).status).toBe(409)
        yield* TestClock.adjust("60 seconds")
        expect((yield* Fiber.join(first)).status).toBe(201)
        const replay = yield* runApp(app, { key: "slow" })
        expect(replay.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
        expect(runs).toBe(1)
      })))
  )

  scoped(
    "a failure after the handler returned (its body, storeStatus) is its defect: stored as a 500",
    () =>
      withStore(Effect.gen(function*() {
        let runs = 0
        const handler = Effect.sync(() => {
          runs++
          return HttpServerResponse.stream(Stream.fail("the body broke"), { status: 201 })
        })
        const idempotent = yield* IdempotencyMiddleware.make()
        const app = handler.pipe(idempotent)
        const first = yield* Effect.exit(runApp(app, { key: "broken" }))
        expect(first._tag).toBe("Failure")
        const retry = yield* runApp(app, { key: "broken" })
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
        yield* Effect.exit(runApp(ok.pipe(throwing), { key: "throws" }))
        expect((yield* runApp(ok.pipe(throwing), { key: "throws" })).status).toBe(500)
        expect(runs).toBe(2)
      }))
  )

  scoped(
    "a handler that fails after its client left says so in the log (without the key)",
    () =>
      withStore(Effect.gen(function*() {
        const entered = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const handler = Deferred.succeed(entered, undefined).pipe(
          Effect.andThen(Deferred.await(gate)),
          Effect.andThen(Effect.die(new Error("boom after the client left")))
        )
        const idempotent = yield* IdempotencyMiddleware.make()
        const [, lines] = yield* logged(Effect.gen(function*() {
          const waiting = yield* fork(runApp(handler.pipe(idempotent), { key: "k-9" }))
          yield* Deferred.await(entered)
          yield* Fiber.interrupt(waiting)
          yield* Deferred.succeed(gate, undefined)
          // the handler's fiber logs when it ends: let it run
          for (let i = 0; i < 100; i++) yield* yieldNow
        }))
        const text = lines.join("\n")
        expect(text).toMatch(/client had gone/)
        expect(text).toMatch(/boom after the client left/)
        expect(text).not.toContain("k-9")
      }))
  )

  scoped(
    "multipart bodies reach the handler, parsed from the bytes the middleware read",
    () =>
      withStore(Effect.gen(function*() {
        const handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.map(
            Stream.runCollect(request.multipartStream),
            (parts) => HttpServerResponse.text(Array.from(parts, (part) => part.key).join(","), { status: 201 })
          )).pipe(Effect.orDie)
        const post = yield* serveOrders(handler)
        const boundary = "----boundary7MA4YWxk"
        const field = (name: string, value: string) =>
          `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
        const body = `${field("sku", "A")}${field("qty", "2")}--${boundary}--\r\n`
        const form = { key: "multi", body, headers: { "content-type": `multipart/form-data; boundary=${boundary}` } }
        const reply = yield* post(form)
        expect(reply.status).toBe(201)
        expect(reply.body).toBe("sku,qty")
        // and the key holds: the same form again is a replay
        expect((yield* post(form)).headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      }))
  )
})

// the memory store's own bounds (IdempotencyStoreFull, a scope's cap, its expiry heap): IdempotencyStore.test.ts
