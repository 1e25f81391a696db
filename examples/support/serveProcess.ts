/**
 * Starts `npm run serve`'s program (examples/serve.ts) as a process of its own on a free port, for the
 * scripts that measure or break real processes. Node itself with tsx as a loader: one process, so a kill
 * really stops the server.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

export interface ServeProcess {
  readonly url: string
  readonly child: ChildProcess
  /** Kills the process (SIGKILL by default) and waits until it has exited. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<void>
}

/** Resolves once the process printed its "listening on" line; rejects if it exits first. */
export const startServe = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): Promise<ServeProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/serve.ts", "--port", "0", ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const stop = (signal: NodeJS.Signals = "SIGKILL") =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once("exit", () => done())
        child.kill(signal)
      })
    const onExit = (code: number | null) => reject(new Error(`serve exited (${code}) before listening:\n${output}`))
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match !== null) {
        child.off("exit", onExit)
        resolve({ url: match[1]!, child, stop })
      }
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
    })
    child.once("exit", onExit)
  })
