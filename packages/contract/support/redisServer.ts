/**
 * A redis-server of a test's own, on a port it chooses, so the test can kill it and start it again: the fleet
 * breaker's tests of Redis dying, restarting and restoring a snapshot (both editions; their suites wrap these
 * promises in their Effect).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The redis-server binary (`REDIS_SERVER`, default /usr/bin/redis-server). */
export const REDIS_SERVER = process.env.REDIS_SERVER ?? "/usr/bin/redis-server"

/**
 * Starts redis-server on `port`; resolves once it accepts connections. No automatic persistence; it runs in a
 * temporary directory of its own, removed when it exits, unless `dir` is given: then it loads the `dump.rdb`
 * an earlier server left there by `SAVE` (the caller owns the directory).
 */
export const startRedisServer = (port: number, options: { readonly dir?: string } = {}): Promise<ChildProcess> =>
  new Promise((resolve, reject) => {
    const owned = options.dir === undefined
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), "redis-server-"))
    const child = spawn(REDIS_SERVER, [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir
    ], { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("Ready to accept connections")) resolve(child)
    })
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("error", reject)
    child.on("exit", (code) => {
      if (owned) rmSync(dir, { recursive: true, force: true })
      reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`))
    })
  })

/** SIGKILLs a process (if it still runs) and resolves once it has exited. */
export const kill = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })
