/**
 * A real Node HTTP server on 127.0.0.1 (a random port) serving an `effect/http` app, for the tests where sockets are
 * the point (a slow upload, a client that leaves, concurrent duplicates).
 *
 * A stand-in for `@effect/platform-node` 4's `NodeHttpServer`, which this edition's dev dependencies do not have yet:
 * node:http does the sockets, and `HttpEffect.toWebHandlerWith` — Effect's own web handler — runs the app, with the
 * test's context (its TestClock included) and a client that goes away interrupting the handler (the request's
 * `signal`). Only the translation between node:http and web requests is ours; the connection's address becomes the
 * request's `remoteAddress`, as the Node server sets it.
 */
import { Context, Effect, Option } from "effect"
import { HttpEffect, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Readable } from "node:stream"

const peers = new WeakMap<object, string>()

/** The app, with each request's `remoteAddress` the address of its connection. */
const withPeer = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.updateService(app, HttpServerRequest.HttpServerRequest, (request) => {
    const peer = peers.get(request.source)
    return peer === undefined ? request : request.modify({ remoteAddress: Option.some(peer) })
  })

const toWeb = (req: IncomingMessage, res: ServerResponse, onAbort: () => void): Request => {
  const controller = new AbortController()
  // the client went away before its answer was written
  req.socket.once("close", () => {
    if (!res.writableFinished) {
      controller.abort()
      onAbort()
    }
  })
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value)
  }
  const bodyless = req.method === "GET" || req.method === "HEAD"
  const request = new Request(`http://127.0.0.1${req.url ?? "/"}`, {
    method: req.method ?? "GET",
    headers,
    signal: controller.signal,
    ...(bodyless ? {} : { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: "half" })
  } as RequestInit)
  if (req.socket.remoteAddress !== undefined) peers.set(request, req.socket.remoteAddress)
  return request
}

const write = async (response: Response, res: ServerResponse) => {
  res.writeHead(response.status, Object.fromEntries(response.headers))
  if (response.body !== null) {
    for await (const chunk of response.body) res.write(chunk)
  }
  res.end()
}

/**
 * Serves `app` on 127.0.0.1 for the rest of the scope; returns its port, and how many requests were aborted so far (a
 * client that closed its connection before its answer).
 */
export const serveNode = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<never>()
    // the app's services are in `context`: the handler needs nothing more per request
    const handler = HttpEffect.toWebHandlerWith(context)(withPeer(app) as Effect.Effect<
      HttpServerResponse.HttpServerResponse,
      E
    >)
    let aborted = 0
    const server = yield* Effect.acquireRelease(
      Effect.callback<ReturnType<typeof createServer>>((resume) => {
        const server = createServer((req, res) => {
          handler(toWeb(req, res, () => aborted++), Context.empty()).then((response) => write(response, res)).catch(
            () => res.destroy()
          )
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    return { port: (server.address() as AddressInfo).port, aborted: () => aborted }
  })
