import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

export interface Served {
  readonly url: string
  readonly child: ChildProcess
}

/**
 * Starts `npm run serve`'s program (`examples/serve.ts`) as a separate process on a random port and waits
 * for its "listening on" line; the process is killed when the scope closes.
 */
export const startServe = (args: ReadonlyArray<string> = [], env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.async<Served, Error>((resume) => {
      // node itself with tsx as a loader: one process, so killing it really kills the server
      const child = spawn(process.execPath, ["--import", "tsx", "examples/serve.ts", "--port", "0", ...args], {
        cwd: root,
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
      Effect.async<void>((resume) => {
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
