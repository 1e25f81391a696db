import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import type { HttpApp } from "@effect/platform"
import { NodeHttpClient, NodeHttpServer, Undici } from "@effect/platform-node"
import { Chunk, Effect, Layer, TestClock } from "effect"
import { createServer } from "node:http"
import { connect } from "node:net"

/** A real Node HTTP server on 127.0.0.1 (random port) and an HttpClient whose relative URLs point at it. */
export const TestServer = HttpServer.layerTestClient.pipe(
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)

/** The same server with a plain HttpClient (absolute URLs), for clients that target several servers. */
export const ServerAndClient = Layer.merge(
  NodeHttpClient.layerUndici,
  NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })
)

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** Sends a request and reads the whole reply. */
export const send = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.flatMap(
    HttpClient.HttpClient,
    (client) =>
      Effect.scoped(Effect.flatMap(client.execute(request), (response) =>
        Effect.map(response.text, (body): Reply => ({ status: response.status, headers: response.headers, body }))))
  )

export const post = (path: string, options: { key?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
  send(
    HttpClientRequest.post(path).pipe(
      HttpClientRequest.setHeaders({
        ...(options.key === undefined ? {} : { "idempotency-key": options.key }),
        ...options.headers
      }),
      HttpClientRequest.bodyUnsafeJson(options.body ?? {})
    )
  )

/** Serves `app` for the rest of the scope. */
export const serve = <E, R>(app: HttpApp.Default<E, R>) => HttpServer.serveEffect(app)

/**
 * Sends raw bytes over TCP (for headers and targets an HTTP client refuses to send, or rewrites) and returns all the
 * server answered once it closed the connection (`""` on an error).
 */
export const rawReply = (request: string) =>
  Effect.flatMap(HttpServer.HttpServer, (server) =>
    Effect.async<string>((resume) => {
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const socket = connect({ host: "127.0.0.1", port }, () => socket.end(Buffer.from(request, "latin1")))
      let data = ""
      socket.on("data", (chunk) => {
        data += chunk.toString("latin1")
      })
      socket.on("close", () => resume(Effect.succeed(data)))
      socket.on("error", () => resume(Effect.succeed("")))
      return Effect.sync(() => socket.destroy())
    }))

/** {@link rawReply}'s status line's code (`-1` for none). */
export const rawStatus = (request: string) =>
  Effect.map(rawReply(request), (reply) => {
    const code = Number(reply.split(" ")[1])
    return Number.isInteger(code) ? code : -1
  })

/** Waits (yielding to I/O, not sleeping) until some fiber sleeps on the TestClock, e.g. a server handler. */
export const untilSleeping = Effect.gen(function*() {
  for (let i = 0; i < 10_000; i++) {
    if (Chunk.isNonEmpty(yield* TestClock.sleeps())) return
    yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
  }
  return yield* Effect.die(new Error("nothing started sleeping on the TestClock"))
})

/**
 * Runs `effect` as another client: its `HttpClient` (relative URLs, like `TestServer`'s) connects to the test
 * server from `localAddress`, another loopback address (Linux answers on all of 127.0.0.0/8).
 */
export const asClient = (localAddress: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const agent = yield* Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent({ localAddress })),
      (a) => Effect.promise(() => a.close())
    )
    const client = NodeHttpClient.makeUndici(agent).pipe(
      HttpClient.mapRequest(HttpClientRequest.prependUrl(`http://127.0.0.1:${port}`))
    )
    return yield* Effect.provideService(effect, HttpClient.HttpClient, client)
  })
