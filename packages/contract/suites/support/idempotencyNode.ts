/**
 * A real HTTP server for the idempotency suites whose sockets are the point (the connection's own address, a
 * Content-Length that lies, a client that hangs up): the edition's NodeHttpServer on 127.0.0.1 (a random port,
 * the adapter's `serveNode`), and a client on node:http that can connect from another loopback address (Linux
 * answers on all of 127.0.0.0/8). The server's handlers run with the services of the fiber that serves: the test's
 * TestClock included. Written once against the adapter (not a suite), so compiled and run against each edition.
 */
import { callback } from "#edition"
import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import { connect } from "node:net"

/** Serves `app` on 127.0.0.1 for the rest of the test's scope; returns the port. */
export { serveNode } from "#edition"

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface Post {
  readonly key?: string
  /** A JSON body (default `{}`). */
  readonly body?: unknown
  readonly headers?: Readonly<Record<string, string>>
  /** The loopback address the client connects from (default the system's choice, 127.0.0.1). */
  readonly from?: string
}

/** A POST to `path` with a JSON body; the reply read whole. A fresh connection each time. */
export const post = (port: number, path: string, init: Post = {}): Effect.Effect<Reply> =>
  callback<Reply>((resume) => {
    const body = JSON.stringify(init.body ?? {})
    const req = httpRequest({
      host: "127.0.0.1",
      port,
      path,
      method: "POST",
      agent: false,
      ...(init.from === undefined ? {} : { localAddress: init.from }),
      headers: {
        "content-type": "application/json",
        "content-length": String(Buffer.byteLength(body)),
        ...(init.key === undefined ? {} : { "idempotency-key": init.key }),
        ...init.headers
      }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const headers: Record<string, string> = {}
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
        }
        resume(Effect.succeed({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString("utf8") }))
      })
      res.on("error", (error) => resume(Effect.die(error)))
    })
    req.on("error", (error) => resume(Effect.die(error)))
    req.end(body)
    return Effect.sync(() => req.destroy())
  })

/**
 * A raw TCP client (for requests an HTTP client refuses to send): writes `request`; `reply` is what the server
 * sent once it closed the connection, `leave` closes it without reading the answer.
 */
export const rawClient = (port: number, request: string) => {
  let data = ""
  let resolveClosed: () => void = () => {}
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve))
  const socket = connect({ host: "127.0.0.1", port }, () => socket.write(Buffer.from(request, "latin1")))
  socket.on("data", (chunk) => (data += chunk.toString("latin1")))
  socket.on("close", () => resolveClosed())
  socket.on("error", () => resolveClosed())
  return {
    reply: Effect.promise(() => closed.then(() => data)),
    leave: Effect.promise(() => {
      socket.destroy()
      return closed
    })
  }
}

/** The status code of a raw HTTP reply (`-1` for none). */
export const statusOf = (reply: string): number => {
  const code = Number(reply.split(" ")[1])
  return Number.isInteger(code) ? code : -1
}
