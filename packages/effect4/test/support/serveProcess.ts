/**
 * The Effect 4 edition's `npm run serve` (examples/serve.ts) as a separate process, for the tests that speak to it
 * over HTTP only, as the Effect 3 edition's test/support/serveProcess.ts does for its own.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { nodeArgs, pkg } from "../../examples/support/node.js"

export { pkg }

/** The arguments of `node` that run an example as `npm run serve` and `npm run demo` do, in `pkg`. */
export const exampleArgs = (script: string, args: ReadonlyArray<string>) => [...nodeArgs, script, ...args]

export interface Served {
  readonly url: string
  readonly child: ChildProcess
}

/**
 * Starts examples/serve.ts on a random port and waits for its "listening on" line; the process is killed when the
 * scope closes.
 */
export const startServe = (args: ReadonlyArray<string> = [], env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.callback<Served, Error>((resume) => {
      // node itself: one process, so killing it really kills the server
      const child = spawn(process.execPath, exampleArgs("examples/serve.ts", ["--port", "0", ...args]), {
        cwd: pkg,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString()
        const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
        if (match !== null) resume(Effect.succeed({ url: match[1]!, child }))
      })
      child.stderr.on("data", (chunk: Buffer) => {
        output += chunk.toString()
      })
      child.on("exit", (code) => resume(Effect.fail(new Error(`serve exited (${code}) before listening:\n${output}`))))
      return Effect.sync(() => child.kill("SIGKILL"))
    }),
    ({ child }) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}

export const request = (url: string, init: RequestInit = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

export const postOrder = (
  base: string,
  options: { key?: string; body?: unknown; query?: string; headers?: Record<string, string> } = {}
) =>
  request(`${base}/orders${options.query ?? ""}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.key === undefined ? {} : { "idempotency-key": options.key }),
      ...options.headers
    },
    body: JSON.stringify(options.body ?? { sku: "BOOK-1", qty: 1 })
  })

export const orderCount = (base: string, headers: Record<string, string> = {}) =>
  Effect.map(request(`${base}/orders/count`, { headers }), (a) => (JSON.parse(a.body) as { count: number }).count)
