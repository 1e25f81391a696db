/**
 * Real sockets for the suites of the server middlewares: a raw TCP client, for requests an HTTP client refuses to
 * send or for a client that hangs up, and `fetch` for the others. The server is the adapter's `serveNode` (each
 * edition's NodeHttpServer on 127.0.0.1). Written once against the common Effect API (not a suite: its name does
 * not end in `.test.ts`).
 */
import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import { connect } from "node:net"

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/**
 * A raw TCP client: writes `request`; `reply` is what the server sent once it closed the connection, `leave`
 * closes it without reading the answer, `received` and `closed` say what happened so far.
 */
export const rawClient = (port: number, request: string) => {
  const state = { received: "", closed: false }
  let resolveClosed: () => void = () => {}
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve))
  const socket = connect({ host: "127.0.0.1", port }, () => socket.write(Buffer.from(request, "latin1")))
  socket.on("data", (chunk) => (state.received += chunk.toString("latin1")))
  socket.on("close", () => {
    state.closed = true
    resolveClosed()
  })
  socket.on("error", () => resolveClosed())
  return {
    state,
    reply: Effect.promise(() => closed.then(() => state.received)),
    leave: Effect.promise(() => {
      socket.destroy()
      return closed
    })
  }
}

/** A POST with fetch; the reply read whole. */
export const send = (
  port: number,
  path: string,
  init: { readonly body?: string; readonly headers?: Record<string, string> } = {}
) =>
  Effect.promise(async (): Promise<Reply> => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: "POST",
      body: init.body ?? "{}",
      headers: { "content-type": "application/json", ...init.headers }
    })
    return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() }
  })

/** A GET of `path` from the loopback address `from` (Linux answers on all of 127.0.0.0/8); the reply read whole. */
export const getFrom = (
  port: number,
  path: string,
  from: string,
  headers: Readonly<Record<string, string>> = {}
): Effect.Effect<Reply> =>
  Effect.promise(() =>
    new Promise<Reply>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, path, agent: false, localAddress: from, headers }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => {
          const flat: Record<string, string> = {}
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : value
          }
          resolve({ status: res.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks).toString("utf8") })
        })
        res.on("error", reject)
      })
      req.on("error", reject)
      req.end()
    })
  )

/** Yields to I/O once (a socket's events, a web body's promises). */
export const ioTurn: Effect.Effect<void> = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
